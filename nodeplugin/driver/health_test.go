package driver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drahealth "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestHealth watches device health as the kubelet does: every device is
// healthy while NVML reads its GPU, and unhealthy with a reason once NVML
// reports the GPU lost.
func TestHealth(t *testing.T) {
	e := newEnv(t, "health-node")
	_, cfg := e.startPlugin("health-node", 1)
	conn, err := grpc.NewClient("unix://"+cfg.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	stream, err := drahealth.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealth.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Devices) != 7 {
		t.Fatalf("health report covers %d devices, want 7", len(r.Devices))
	}
	for _, d := range r.Devices {
		if d.Health != drahealth.HealthStatus_HEALTHY || d.Device.PoolName != "health-node" {
			t.Errorf("device %v: %v", d.Device, d.Health)
		}
	}
	if err := simulate.SetLost(cfg.NVML.(*server.Server), 0, true); err != nil {
		t.Fatal(err)
	}
	// the plugin reports again as soon as the GPU's health changes
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("no report of the lost GPU: %v", err)
		}
		if r.Devices[0].Health == drahealth.HealthStatus_HEALTHY {
			continue
		}
		for _, d := range r.Devices {
			if d.Health != drahealth.HealthStatus_UNHEALTHY || !strings.Contains(d.Message, "gpu-lost") {
				t.Errorf("device %s after the GPU was lost: %v %q", d.Device.DeviceName, d.Health, d.Message)
			}
		}
		return
	}
}

// TestSkippedGPU: a GPU NVML cannot read is left out of the slices, logged
// and counted in gpuslice_gpu_skipped, and the plugin serves the others.
func TestSkippedGPU(t *testing.T) {
	e := newEnv(t, "skip-node")
	cfg := pluginConfig(e.client, "skip-node", t.TempDir(), 2)
	cfg.NVML.(*server.Server).Devices[1].(*server.Device).GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	e.waitSlices("skip-node", 7)
	if got := gauge(t, reg, "gpuslice_gpu_skipped", map[string]string{"gpu": "1"}); got != 1 {
		t.Errorf("gpuslice_gpu_skipped{gpu=1} = %v, want 1", got)
	}
	if got := gauge(t, reg, "gpuslice_gpus_published", nil); got != 1 {
		t.Errorf("gpuslice_gpus_published = %v, want 1", got)
	}
}
