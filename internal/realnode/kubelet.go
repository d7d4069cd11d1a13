package realnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/internal/proc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// kubeletConfig is the node's KubeletConfiguration: the settings a kubelet
// needs beside other kubelets and the host's own processes on one machine.
func kubeletConfig(l layout, slot int, cgroupRoot string, cgroupV1 bool) *kubeletv1beta1.KubeletConfiguration {
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		// kubelet 1.35+ refuses cgroup v1 hosts unless told otherwise.
		FailCgroupV1: ptr.To(!cgroupV1),
		CgroupDriver: "cgroupfs",
		// A cgroup tree of its own, beside other nodes' and the host's.
		CgroupRoot:    cgroupRoot,
		CgroupsPerQOS: ptr.To(true),
		// Nodes share the machine: none may reserve it for itself.
		EnforceNodeAllocatable:   []string{"none"},
		FailSwapOn:               ptr.To(false),
		ContainerRuntimeEndpoint: "unix://" + l.containerdSocket(),
		// Served on the node's own address, so nodes share no port; the API
		// server reaches it there for logs and exec.
		Address:            nodeIP(slot),
		Port:               10250,
		ReadOnlyPort:       0,
		HealthzBindAddress: nodeIP(slot),
		HealthzPort:        ptr.To[int32](10248),
		// A local cluster: the API server's calls (logs, exec) are not
		// authenticated with client certificates.
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:   kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		PodLogsDir:      l.podLogs(),
		VolumePluginDir: l.volumePlugins(),
		ResolverConfig:  ptr.To(""),
		// The machine's disk is shared with everything else on it: evict
		// only when it is really full.
		EvictionHard: map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%",
		},
		ImageGCHighThresholdPercent: ptr.To[int32](99),
		ImageGCLowThresholdPercent:  ptr.To[int32](98),
		SerializeImagePulls:         ptr.To(false),
		NodeStatusUpdateFrequency:   metav1.Duration{Duration: 5 * time.Second},
		SyncFrequency:               metav1.Duration{Duration: 10 * time.Second},
	}
}

func writeKubeletConfig(path string, cfg *kubeletv1beta1.KubeletConfiguration) error {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func (n *Node) writeKubelet() error {
	cfg := kubeletConfig(n.l, n.rec.Slot, "/"+n.rec.CgroupRel, v1Mounts(n.ms))
	return writeKubeletConfig(n.l.kubeletConfig(), cfg)
}

func (n *Node) kubeletCommand() (*proc.Process, error) {
	l := n.l
	args := []string{filepath.Join(n.opts.BinDir, "kubelet"),
		"--config=" + l.kubeletConfig(),
		"--kubeconfig=" + n.opts.Kubeconfig,
		"--root-dir=" + KubeletDir,
		"--cert-dir=" + l.kubeletCerts(),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--v=2",
	}
	// What NVIDIA's GPU feature discovery labels a GPU node with: the node
	// plugin's DaemonSet selects it.
	var kv []string
	if !n.opts.OutsideDaemonSet {
		kv = append(kv, "nvidia.com/gpu.present=true")
	}
	for k, v := range n.opts.Labels {
		kv = append(kv, k+"="+v)
	}
	if len(kv) > 0 {
		args = append(args, "--node-labels="+strings.Join(kv, ","))
	}
	n.mu.Lock()
	containerd := n.containerd.PID()
	n.mu.Unlock()
	// kubelet's mounts (volumes, its root made shared) must be where
	// containerd and runc see them: containerd's namespace.
	cmd, err := launch{CgroupProcs: n.daemon, JoinMountNS: containerd, Argv: args}.command()
	if err != nil {
		return nil, err
	}
	return proc.Start("kubelet", cmd, l.logs())
}

func (n *Node) startKubelet(ctx context.Context) error {
	p, err := n.kubeletCommand()
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.kubelet = p
	n.mu.Unlock()
	return waitFor(ctx, p, "node "+n.Name+" to be Ready", func(ctx context.Context) (bool, error) {
		node, err := n.opts.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}
