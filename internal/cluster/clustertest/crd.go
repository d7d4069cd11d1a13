package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRD is another project's CustomResourceDefinition as that project
// publishes it in its Go module: the kinds gpuslice renders only where that
// project is installed. tools/crds/crds.txt names the module, version and
// file of each; `make tools` fetches the files once into bin/crds/, and the
// tests read them from there, so the schema is the project's own and no
// test needs the network.
type CRD struct {
	File                 string // its name in bin/crds/
	Group, Version, Kind string
}

// The CRDs gpuslice renders or reads objects of.
var (
	// Kubeflow Training Operator's PyTorchJob.
	PyTorchJob = CRD{File: "kubeflow.org_pytorchjobs.yaml", Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}
	// KEDA's ScaledObject.
	ScaledObject = CRD{File: "keda.sh_scaledobjects.yaml", Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
	// Kubeflow Trainer's TrainJob and the namespaced runtime it runs.
	TrainJob        = CRD{File: "trainer.kubeflow.org_trainjobs.yaml", Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}
	TrainingRuntime = CRD{File: "trainer.kubeflow.org_trainingruntimes.yaml", Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainingRuntime"}
	// Flux's sources, whose artifacts `gpuslice reconcile -flux-source`
	// reads.
	GitRepository = CRD{File: "source.toolkit.fluxcd.io_gitrepositories.yaml", Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}
	OCIRepository = CRD{File: "source.toolkit.fluxcd.io_ocirepositories.yaml", Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}
	// FluxSources are the kinds Flux's source-controller serves: it starts
	// a controller for each, so it runs only where all are installed.
	FluxSources = []CRD{GitRepository, OCIRepository, fluxSource("buckets", "Bucket"), fluxSource("helmrepositories", "HelmRepository"),
		fluxSource("helmcharts", "HelmChart"), fluxSource("externalartifacts", "ExternalArtifact")}
)

func fluxSource(resource, kind string) CRD {
	return CRD{File: "source.toolkit.fluxcd.io_" + resource + ".yaml", Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: kind}
}

// read returns the CRD's file as `make tools` fetched it into bin/crds/.
func (crd CRD) read(tb testing.TB) []byte {
	tb.Helper()
	path := filepath.Join(cluster.FindBinDir(), "crds", crd.File)
	data, err := os.ReadFile(path)
	if err != nil {
		testenv.Unavailable(tb, "the %s CRD is read from %s, which `make tools` fetches (tools/build.sh crds, from the module tools/crds/crds.txt names): %v", crd.Kind, path, err)
	}
	return data
}

// ServeCRD installs the CRDs in the cluster at cfg and returns once the API
// server serves their kinds and publishes their schemas (OpenAPI v3, which
// plan compares objects with). When tb ends it removes them and waits
// until the kinds are no longer served, so that a later test of the same
// cluster sees them absent.
func ServeCRD(tb testing.TB, cfg *rest.Config, crds ...CRD) {
	tb.Helper()
	ctx := context.Background()
	client := dynamic.NewForConfigOrDie(cfg).Resource(crdsGVR)
	disco := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	for _, crd := range crds {
		data := crd.read(tb)
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			tb.Fatalf("read the %s CRD from bin/crds/%s: %v", crd.Kind, crd.File, err)
		}
		if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			tb.Fatalf("install the %s CRD: %v", crd.Kind, err)
		}
		tb.Cleanup(func() {
			if err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
				tb.Errorf("remove the %s CRD: %v", crd.Kind, err)
				return
			}
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				return !served(disco, crd), nil
			}); err != nil {
				tb.Errorf("the %s CRD is still served after its removal: %v", crd.Kind, err)
			}
		})
	}
	for _, crd := range crds {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return served(disco, crd) && published(disco, crd), nil
		}); err != nil {
			tb.Fatalf("the %s CRD is not served with its schema: %v", crd.Kind, err)
		}
	}
}

// served says whether discovery lists the CRD's kind.
func served(disco discovery.DiscoveryInterface, crd CRD) bool {
	list, err := disco.ServerResourcesForGroupVersion(crd.Group + "/" + crd.Version)
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Kind == crd.Kind {
			return true
		}
	}
	return false
}

// published says whether the OpenAPI v3 document of the CRD's
// group-version has its kind: the API server publishes it moments after
// serving it.
func published(disco discovery.DiscoveryInterface, crd CRD) bool {
	paths, err := disco.OpenAPIV3().Paths()
	if err != nil {
		return false
	}
	gv, ok := paths["apis/"+crd.Group+"/"+crd.Version]
	if !ok {
		return false
	}
	doc, err := gv.Schema("application/json")
	return err == nil && bytes.Contains(doc, fmt.Appendf(nil, `"kind":%q`, crd.Kind))
}
