package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// CreateNamespace creates a namespace with the given labels (e.g. the tenant
// label of gpuslice_platform) and waits for its default service account, so
// pods can be created in it right away.
func CreateNamespace(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string) (*corev1.Namespace, error) {
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", name, err)
	}
	if err := WaitForServiceAccount(ctx, client, name); err != nil {
		return nil, err
	}
	return ns, nil
}

// WaitForServiceAccount waits until the controller-manager has created the
// `default` service account in namespace.
func WaitForServiceAccount(ctx context.Context, client kubernetes.Interface, namespace string) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("wait for service account %s/default: %w", namespace, err)
	}
	return nil
}
