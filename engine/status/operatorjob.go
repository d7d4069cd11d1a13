package status

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// operatorJob is a training operator's job kind: where it is served and
// which true condition says it ended well, as that operator writes it.
type operatorJob struct {
	group, kind string
	done, verb  string // the success condition's type, and its word
}

var (
	pyTorchJob = operatorJob{group: "kubeflow.org", kind: "PyTorchJob", done: "Succeeded", verb: "succeeded"}
	trainJob   = operatorJob{group: "trainer.kubeflow.org", kind: "TrainJob", done: "Complete", verb: "completed"}
)

// operatorJobOf is the kind of job the workload's operator runs.
func operatorJobOf(w *spec.Workload) operatorJob {
	if w.TrainJob() {
		return trainJob
	}
	return pyTorchJob
}

// load reads a workload's job; nil when there is none, including where the
// cluster does not serve the kind.
func (o operatorJob) load(ctx context.Context, v *view.View, w *spec.Workload) (*unstructured.Unstructured, error) {
	j, err := get[unstructured.Unstructured](ctx, v, view.ManagedKind(o.group, o.kind), w)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	return j, err
}

// outcome is the phase the job's true success or Failed condition says;
// ok is false while it runs.
func (o operatorJob) outcome(j *unstructured.Unstructured, st *Status) (ok bool) {
	conds, _, _ := unstructured.NestedSlice(j.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] != string(corev1.ConditionTrue) {
			continue
		}
		msg, _ := m["message"].(string)
		switch m["type"] {
		case o.done:
			st.Phase, st.Reason, st.Message = Succeeded, Completed, fmt.Sprintf("the %s %s", o.kind, o.verb)
			st.Ready = st.Replicas
			return true
		case "Failed":
			st.Phase, st.Reason, st.Message = Failed, JobFailed, fmt.Sprintf("the %s failed: %s", o.kind, msg)
			return true
		}
	}
	return false
}
