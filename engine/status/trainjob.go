package status

import (
	"fmt"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// noTrainerPods is the status of a TrainJob with no pod at all: Kubeflow
// Trainer creates them (through a JobSet), so it may not be running.
func noTrainerPods(w *spec.Workload) (Reason, string) {
	return Progressing, fmt.Sprintf("TrainJob %s/%s has no pods yet: Kubeflow Trainer creates its %d nodes' pods through a JobSet; "+
		"if none appear, check that Trainer and JobSet run (kubectl get deployment -n kubeflow-system) and read the TrainJob's conditions and events (kubectl describe trainjob %s -n %s)",
		w.Namespace, w.Name, w.Workers, w.Name, w.Namespace)
}
