package cluster_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/internal/cluster"
)

// schedulerIdentity checks that kube-scheduler runs as a kubeadm cluster's
// does — user system:kube-scheduler, not a member of system:masters — and
// that the ResourceClaim it makes for a pod's extended resource
// (DRAExtendedResource) reaches admission with that user name, which is
// what gpuslice's policies recognise the scheduler's claims by. A policy
// refusing every claim in a namespace of its own, with the requester in
// its message, shows the name on the pod the scheduler could not bind.
func schedulerIdentity(t *testing.T, c *cluster.Cluster, node string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.SchedulerKubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kube-scheduler's kubeconfig: %v", err)
	}
	who := review.Status.UserInfo
	if who.Username != cluster.SchedulerUser || slices.Contains(who.Groups, "system:masters") {
		t.Fatalf("kube-scheduler authenticates as %q in %v, want %s outside system:masters", who.Username, who.Groups, cluster.SchedulerUser)
	}

	const ns, driver, extended = "scheduler-identity", "identity.example.com", "example.com/identity-gpu"
	if _, err := cluster.CreateNamespace(ctx, c.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	cs := c.Client()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "who-makes-claims"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule:       admissionv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"resourceclaims"}},
			}}}},
			Validations: []admissionv1.Validation{{Expression: "false",
				MessageExpression: `'claim made by user ' + request.userInfo.username + ' in groups [' + request.userInfo.?groups.orValue([]).join(',') + ']'`}},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "identity-gpu"},
		Spec: resourcev1.DeviceClassSpec{
			Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}},
			ExtendedResourceName: ptr.To(extended),
		},
	}
	if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-identity"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}}},
	}
	if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The policy is enforced a moment after it is created: wait until it
	// refuses the admin's claim before the scheduler makes its own.
	probe := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}}}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := cs.ResourceV1().ResourceClaims(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "claim made by user admin") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claim policy is not enforced after 30s: the admin's claim got %v", err)
		}
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "asks-by-extended-resource"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{extended: resource.MustParse("1")}}}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "claim made by user " + cluster.SchedulerUser + " in groups [system:authenticated]"
	var last string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("pod bound to %s although its extended resource claim is refused", p.Spec.NodeName)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				last = cond.Message
			}
		}
		if strings.Contains(last, want) {
			t.Logf("the scheduler's extended resource claim was requested by: %s", want)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod's PodScheduled condition does not name the scheduler's identity (want %q) after 60s; last message: %q\n%s", want, last, c.LogTails(20))
		}
	}

	// Leave the cluster as it was for what the test does next.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Error(err)
	}
	if err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if err := cs.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if err := cs.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}
