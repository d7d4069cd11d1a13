package runner

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/localregistry"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// The runner's namespace and ServiceAccount: tofu-controller's; and the
// administrator's, who applies the platform once.
const (
	runnerNamespace = "flux-system"
	runnerAccount   = "tf-runner"
	adminAccount    = "tf-admin"
)

// runTimeout bounds one runner pod: init from the OCI mirror and an apply
// of the stack (a bound for a hung run, not a timing target).
const runTimeout = 5 * time.Minute

// runnerPod is a runner pod as tofu-controller makes it: OpenTofu as uid
// 65532 with a read-only root, writable emptyDirs for the working
// directory, the plugin cache and (tofu init's) /tmp only, no HOME it could
// write (the image has no passwd: HOME is /), the ServiceAccount's token
// and no kubeconfig. Its working directory holds the ConfigMap stack's
// main.tf; the CLI configuration (ConfigMap cli-config) is the only
// provider source. Each step but the last runs as an init container.
func runnerPod(env *realnodetest.Env, name, stack string, steps ...[]string) *corev1.Pod {
	return podAs(env, runnerAccount, name, stack, steps...)
}

// podAs is a runner pod with the ServiceAccount account.
func podAs(env *realnodetest.Env, account, name, stack string, steps ...[]string) *corev1.Pod {
	mounts := []corev1.VolumeMount{
		{Name: "work", MountPath: "/work"},
		{Name: "plugin-cache", MountPath: "/plugin-cache"},
		{Name: "stack", MountPath: "/work/main.tf", SubPath: "main.tf", ReadOnly: true},
		{Name: "cli-config", MountPath: "/config", ReadOnly: true},
	}
	container := func(i int, args []string) corev1.Container {
		m := mounts
		env := []corev1.EnvVar{
			{Name: "TF_CLI_CONFIG_FILE", Value: "/config/tofurc"},
			{Name: "TF_PLUGIN_CACHE_DIR", Value: "/plugin-cache"},
		}
		if i < len(steps)-1 {
			// tofu init downloads the provider through /tmp.
			m = append(slices.Clone(mounts), corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
		} else {
			// What runs the provider (plan, apply, destroy) has no /tmp: its
			// one file, go-plugin's socket, goes into TMPDIR, here inside
			// the working directory (tofu init made .terraform), so the
			// read-only root proves it writes nowhere else.
			env = append(env, corev1.EnvVar{Name: "TMPDIR", Value: "/work/.terraform"})
		}
		return corev1.Container{
			Name: fmt.Sprintf("%s-%d", args[0], i), Image: images.TofuRunner, Args: args, VolumeMounts: m, Env: env,
			SecurityContext: &corev1.SecurityContext{
				ReadOnlyRootFilesystem:   ptr.To(true),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: runnerNamespace, Labels: map[string]string{"app": "tf-runner"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: account,
			RestartPolicy:      corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr.To[int64](images.RunnerUser), RunAsGroup: ptr.To[int64](images.RunnerUser), RunAsNonRoot: ptr.To(true),
			},
			// The registry's name, as the cluster's DNS would give it.
			HostAliases: []corev1.HostAlias{{IP: env.Nodes[0].IP, Hostnames: []string{localregistry.Host}}},
			Volumes: []corev1.Volume{
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "plugin-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "stack", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: stack}}}},
				{Name: "cli-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cli-config"}}}},
			},
		},
	}
	for i, s := range steps {
		if i < len(steps)-1 {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, container(i, s))
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, container(i, s))
		}
	}
	return pod
}

// tofuInit and the other steps are what tofu-controller's runner runs.
var tofuInit = []string{"init", "-input=false", "-no-color"}

// runPod creates pod and waits until it ends; it returns whether it
// succeeded, the last container's exit code and every container's log.
func runPod(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) (bool, int32, string) {
	t.Helper()
	ctx := context.Background()
	pods := env.Cluster.Client().CoreV1().Pods(runnerNamespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create runner pod %s: %v", pod.Name, err)
	}
	var done *corev1.Pod
	realnodetest.Eventually(t, runTimeout, "runner pod "+pod.Name+" ends", func() (bool, string) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		done = p
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, podState(p)
	})
	logs := podLogs(env, done)
	var code int32 = -1
	if s := done.Status.ContainerStatuses; len(s) == 1 && s[0].State.Terminated != nil {
		code = s[0].State.Terminated.ExitCode
	}
	return done.Status.Phase == corev1.PodSucceeded, code, logs
}

// mustRun runs pod and fails the test unless it succeeds.
func mustRun(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) string {
	t.Helper()
	ok, code, logs := runPod(t, env, pod)
	if !ok {
		t.Fatalf("runner pod %s failed (exit %d):\n%s", pod.Name, code, logs)
	}
	return logs
}

func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, c := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf("; %s waiting: %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			s += fmt.Sprintf("; %s exited %d", c.Name, c.State.Terminated.ExitCode)
		case c.State.Running != nil:
			s += "; " + c.Name + " running"
		}
	}
	return s
}

// podLogs are the logs of every container of p, each headed by its name.
func podLogs(env *realnodetest.Env, p *corev1.Pod) string {
	var b strings.Builder
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		data, err := env.Cluster.Client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(context.Background())
		fmt.Fprintf(&b, "--- %s (%v)\n%s\n", c.Name, err, data)
	}
	return b.String()
}

// waitForLine follows the log of the pod's container until a line holds
// want, failing the test if the container ends first. The returned
// function waits for the end of the log and returns all of it.
func waitForLine(t *testing.T, env *realnodetest.Env, name, container, want string) func() string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	pods := env.Cluster.Client().CoreV1().Pods(runnerNamespace)
	realnodetest.Eventually(t, runTimeout, container+" of "+name+" starts", func() (bool, string) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == container && (c.State.Running != nil || c.State.Terminated != nil) {
				return true, ""
			}
		}
		return p.Status.Phase == corev1.PodFailed, podState(p)
	})
	stream, err := pods.GetLogs(name, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
	if err != nil {
		cancel()
		t.Fatalf("follow the log of %s/%s: %v", name, container, err)
	}
	var seen strings.Builder
	sc := bufio.NewScanner(stream)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), want) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer cancel()
				defer stream.Close()
				io.Copy(&seen, stream)
			}()
			return func() string { <-done; return seen.String() }
		}
	}
	stream.Close()
	cancel()
	t.Fatalf("%s/%s ended without logging %q:\n%s", name, container, want, seen.String())
	return nil
}

// deleteAndWait deletes the pod with the default grace period (SIGTERM,
// then SIGKILL 30 s later), waits until it is gone and returns the last
// state its API object had: its containers' exit codes.
func deleteAndWait(t *testing.T, env *realnodetest.Env, name string) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods := env.Cluster.Client().CoreV1().Pods(runnerNamespace)
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			last = p
		}
		if ev.Type == watch.Deleted {
			return last
		}
	}
	t.Fatalf("runner pod %s not gone within 2 minutes; last state: %v", name, last)
	return nil
}
