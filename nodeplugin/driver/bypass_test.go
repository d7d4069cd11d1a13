package driver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/nodeplugin/driver"
)

// A node whose NVIDIA Container Toolkit honours NVIDIA_VISIBLE_DEVICES from
// unprivileged containers is reported: a Warning event on the Node and
// gpuslice_node_env_bypass_open = 1; a closed one sets the gauge to 0 and
// records nothing.
func TestToolkitBypassReported(t *testing.T) {
	e := newEnv(t, "bypass-open", "bypass-closed")
	for node, config := range map[string]string{
		"bypass-open":   "accept-nvidia-visible-devices-envvar-when-unprivileged = true\n",
		"bypass-closed": "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n",
	} {
		dir := filepath.Join(t.TempDir(), node)
		cfg := pluginConfig(e.client, node, dir, 1)
		cfg.ToolkitConfig = filepath.Join(dir, "config.toml")
		if err := os.WriteFile(cfg.ToolkitConfig, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		cfg.Registerer = reg
		p, err := driver.Start(e.ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		p.Stop()
		want := map[string]float64{"bypass-open": 1, "bypass-closed": 0}[node]
		if got := gauge(t, reg, "gpuslice_node_env_bypass_open", nil); got != want {
			t.Errorf("%s: gpuslice_node_env_bypass_open = %v, want %v", node, got, want)
		}
	}
	events, err := e.client.EventsV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, ev := range events.Items {
		if ev.Reason == driver.EventReasonBypassOpen && ev.Regarding.Kind == "Node" && ev.Type == "Warning" {
			found[ev.Regarding.Name] = ev.Note
		}
	}
	if note := found["bypass-open"]; !strings.Contains(note, "accept-nvidia-visible-devices-envvar-when-unprivileged") {
		t.Errorf("no Warning event naming the setting on node bypass-open: %v", found)
	}
	if _, ok := found["bypass-closed"]; ok {
		t.Errorf("an event on bypass-closed, whose toolkit refuses the variable")
	}
}
