package render

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// AnnotationGPUsPerPod records gpus_per_pod on the pod template when it is
// more than 1, so readback knows it without the claim template.
const AnnotationGPUsPerPod = "gpuslice.dev/gpus-per-pod"

func podAnnotations(w *spec.Workload) map[string]string {
	if w.DevicesPerPod() == 1 {
		return nil
	}
	return map[string]string{AnnotationGPUsPerPod: strconv.Itoa(w.DevicesPerPod())}
}

// WorkersServiceName names the headless Service of a distributed training
// job: the subdomain that gives each worker a stable DNS name. It is not
// the workload's name, which an expose block's Service takes.
func WorkersServiceName(w *spec.Workload) string { return w.Name + "-workers" }

// MasterAddr is worker 0's DNS name, where the others meet it: an indexed
// Job's pod is named <job>-<index> and, with a subdomain, resolvable as
// <hostname>.<subdomain>.<namespace>.svc.
func MasterAddr(w *spec.Workload) string {
	return fmt.Sprintf("%s-0.%s.%s.svc", w.Name, WorkersServiceName(w), w.Namespace)
}

// training renders a distributed training job without a CRD: an Indexed
// Job whose completion index is each worker's rank, and the headless
// Service that makes worker 0 reachable by name. Every pod gets its own
// claim from the workload's claim template.
func (r renderer) training(w *spec.Workload, template corev1.PodTemplateSpec) (*batchv1.Job, *corev1.Service) {
	labels := map[string]string{"app.kubernetes.io/name": w.Name, objects.LabelWorkload: w.Name}
	svc := &corev1.Service{
		ObjectMeta: r.meta(w.Address, w.Namespace, WorkersServiceName(w), labels),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  WorkloadSelector(w),
			// Workers resolve worker 0 while it starts, before any
			// readiness probe passes: the rendezvous is how they get ready.
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{Name: "rendezvous", Port: spec.DefaultMasterPort,
				TargetPort: intstr.FromInt32(spec.DefaultMasterPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	template.Spec.Subdomain = WorkersServiceName(w)
	c := &template.Spec.Containers[0]
	c.Env = append(c.Env, trainingEnv(w)...)
	// OnFailure restarts a failed worker in place: the pod keeps its name,
	// its rank and the slices its claim holds, so the gang never has to
	// win the GPUs back (a replacement pod under restartPolicy Never would
	// queue for new slices while the other workers hold theirs). torchrun
	// restarts the rendezvous around it. One failure usually fails every
	// worker at once, so the backoff limit allows three rounds per worker.
	// The Job completes when every worker has exited 0, as torchrun's
	// workers finish together.
	template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	job := &batchv1.Job{
		ObjectMeta: r.meta(w.Address, w.Namespace, w.Name, labels),
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To(w.Workers), Parallelism: ptr.To(w.Workers),
			BackoffLimit: ptr.To(3 * w.Workers),
			Template:     template,
		},
	}
	return job, svc
}

// trainingEnv is the rendezvous environment as Kubeflow's PyTorchJob sets
// it and torchrun reads it (PET_<flag> for each --flag).
func trainingEnv(w *spec.Workload) []corev1.EnvVar {
	rank := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + batchv1.JobCompletionIndexAnnotation + "']"}}
	port := strconv.Itoa(spec.DefaultMasterPort)
	return []corev1.EnvVar{
		{Name: "MASTER_ADDR", Value: MasterAddr(w)},
		{Name: "MASTER_PORT", Value: port},
		{Name: "WORLD_SIZE", Value: strconv.Itoa(int(w.Workers))},
		{Name: "RANK", ValueFrom: rank},
		{Name: "PET_MASTER_ADDR", Value: MasterAddr(w)},
		{Name: "PET_MASTER_PORT", Value: port},
		{Name: "PET_NNODES", Value: strconv.Itoa(int(w.Workers))},
		{Name: "PET_NODE_RANK", ValueFrom: rank},
		{Name: "PET_NPROC_PER_NODE", Value: strconv.Itoa(w.DevicesPerPod())},
	}
}

// appendObject renders typed and appends it to out.
func appendObject(out []objects.Object, address string, typed runtime.Object, apiVersion, kind string) []objects.Object {
	return append(out, object(address, typed, apiVersion, kind))
}
