package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

	"github.com/gpuslice/gpuslice/internal/testenv"
)

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRD is another project's CustomResourceDefinition as that project
// publishes it in its Go module: the kinds gpuslice renders only where that
// project is installed. The tests read the file from the module itself
// (through the Go module proxy and cache, as `go mod download` fetches it),
// never from a copy of ours, so the schema is the project's own.
type CRD struct {
	Module, ModuleVersion, Path string // where the project keeps the file
	Group, Version, Kind        string
}

// The CRDs gpuslice renders objects of. Versions: the Training Operator's
// v1.9.4 is the newest the module proxy serves (v1.8.1's PyTorchJob still
// has the pre-1.31 pod resourceClaims source, which the API server would
// prune); KEDA's v2.21.1 needs a newer Go than ours, so v2.21.0.
var (
	// Kubeflow Training Operator's PyTorchJob.
	PyTorchJob = CRD{Module: "github.com/kubeflow/training-operator", ModuleVersion: "v1.9.4", Path: "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
		Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}
	// KEDA's ScaledObject.
	ScaledObject = CRD{Module: "github.com/kedacore/keda/v2", ModuleVersion: "v2.21.0", Path: "config/crd/bases/keda.sh_scaledobjects.yaml",
		Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
	// Kubeflow Trainer's TrainJob and the namespaced runtime it runs.
	TrainJob = CRD{Module: "github.com/kubeflow/trainer/v2", ModuleVersion: "v2.0.0", Path: "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
		Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}
	TrainingRuntime = CRD{Module: "github.com/kubeflow/trainer/v2", ModuleVersion: "v2.0.0", Path: "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
		Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainingRuntime"}
)

// moduleDirs caches each module's directory in the module cache for the
// test binary's life: one `go mod download` per module and process.
var moduleDirs sync.Map // "module@version" -> string

// read returns the CRD's file from its project's module, downloading the
// module into Go's module cache first when it is not there.
func (crd CRD) read(tb testing.TB) []byte {
	tb.Helper()
	key := crd.Module + "@" + crd.ModuleVersion
	dir, ok := moduleDirs.Load(key)
	if !ok {
		if _, err := exec.LookPath("go"); err != nil {
			testenv.Unavailable(tb, "reading the %s CRD from its Go module needs the go command: %v", crd.Kind, err)
		}
		cmd := exec.Command("go", "mod", "download", "-json", key)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var info struct{ Dir, Error string }
		if jerr := json.Unmarshal(out, &info); err != nil || jerr != nil || info.Error != "" || info.Dir == "" {
			testenv.Unavailable(tb, "the %s CRD comes from the Go module %s, which could not be downloaded (is the Go module proxy reachable?): %v %s %s",
				crd.Kind, key, err, info.Error, strings.TrimSpace(stderr.String()))
		}
		dir, _ = moduleDirs.LoadOrStore(key, info.Dir)
	}
	data, err := os.ReadFile(filepath.Join(dir.(string), filepath.FromSlash(crd.Path)))
	if err != nil {
		tb.Fatalf("the %s CRD is not where module %s keeps it: %v", crd.Kind, key, err)
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
			tb.Fatalf("read %s from %s@%s: %v", crd.Path, crd.Module, crd.ModuleVersion, err)
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
