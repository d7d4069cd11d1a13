package runner

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// rendered are the kinds the quickstart's resources make.
var rendered = []schema.GroupVersionResource{
	{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"},
	{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	{Version: "v1", Resource: "resourcequotas"},
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "batch", Version: "v1", Resource: "jobs"},
}

// managed lists the objects gpuslice labelled as its own that are not on
// their way out.
func managed(t *testing.T, env *realnodetest.Env) []string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	selector := contract.LabelManagedBy + "=" + contract.ManagedBy
	var out []string
	for _, gvr := range rendered {
		list, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatalf("list %s: %v", gvr.Resource, err)
		}
		for _, o := range list.Items {
			if o.GetDeletionTimestamp() == nil {
				out = append(out, fmt.Sprintf("%s %s/%s", gvr.Resource, o.GetNamespace(), o.GetName()))
			}
		}
	}
	return out
}
