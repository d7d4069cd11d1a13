package clustertest

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ServeCRD makes the cluster at cfg serve kind in group/version through a
// minimal CRD (any spec accepted): the kinds gpuslice renders only where
// another project is installed (KEDA, Kubeflow's Training Operator). It
// returns once the API server serves the kind, and removes the CRD when
// tb ends, waiting until the kind is no longer served, so that a later
// test of the same cluster sees it absent.
func ServeCRD(tb testing.TB, cfg *rest.Config, group, version, plural, kind string) {
	tb.Helper()
	ctx := context.Background()
	crds := dynamic.NewForConfigOrDie(cfg).Resource(crdsGVR)
	disco := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	served := func() bool {
		list, err := disco.ServerResourcesForGroupVersion(group + "/" + version)
		if err != nil {
			return false
		}
		for _, r := range list.APIResources {
			if r.Kind == kind {
				return true
			}
		}
		return false
	}
	name := plural + "." + group
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("install the %s CRD: %v", kind, err)
	}
	tb.Cleanup(func() {
		if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			tb.Errorf("remove the %s CRD: %v", kind, err)
			return
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return !served(), nil }); err != nil {
			tb.Errorf("the %s CRD is still served after its removal: %v", kind, err)
		}
	})
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return served(), nil }); err != nil {
		tb.Fatalf("the %s CRD is not served: %v", kind, err)
	}
}
