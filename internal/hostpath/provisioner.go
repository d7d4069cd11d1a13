// Package hostpath is the local cluster's storage: a dynamic provisioner
// (sigs.k8s.io/sig-storage-lib-external-provisioner) that gives each
// PersistentVolumeClaim a directory under the cluster's directory, and the
// default StorageClass that names it, so claims bind as on a cluster with a
// default class. Every local node runs on this machine, so a volume is
// reachable from all of them and needs no node affinity.
package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Names of the default StorageClass and its provisioner.
const (
	StorageClass = "local-path"
	Provisioner  = "gpuslice.dev/host-path"
)

// Start creates the default StorageClass and runs the provisioner until
// ctx ends; volumes are directories under dir.
func Start(ctx context.Context, client kubernetes.Interface, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("volume directory: %w", err)
	}
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       Provisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass %s: %w", StorageClass, err)
	}
	pc := controller.NewProvisionController(ctx, client, Provisioner, &provisioner{dir: dir},
		controller.LeaderElection(false))
	go pc.Run(ctx)
	return nil
}

type provisioner struct{ dir string }

func (p *provisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	path := filepath.Join(p.dir, o.PVName)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("create volume directory %s: %w", path, err)
	}
	// Any user in the pod may write, as on a fresh cloud disk.
	if err := os.Chmod(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: *o.StorageClass.ReclaimPolicy,
			AccessModes:                   o.PVC.Spec.AccessModes,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectory)},
			},
		},
	}, controller.ProvisioningFinished, nil
}

func (p *provisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return &controller.IgnoredError{Reason: "not a host-path volume"}
	}
	path := pv.Spec.HostPath.Path
	// Only what this provisioner made: never a path outside its directory.
	if rel, err := filepath.Rel(p.dir, path); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return &controller.IgnoredError{Reason: fmt.Sprintf("%s is not under %s", path, p.dir)}
	}
	if err := os.RemoveAll(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove volume directory %s: %w", path, err)
	}
	return nil
}
