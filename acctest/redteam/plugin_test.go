package redteam

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// TestNodePluginOnTheHostSide plants something in place of the claim's
// accounting region from inside the container (its directory is writable
// there) and waits for the node plugin to restart, as an upgrade or a crash
// makes it: the plugin runs on the host, so a symlink it followed would
// reach the host's files (it once chmodded them 0666 and wrote a region
// into them), and a FIFO it opened would block it. The host file must stay
// as it was, the plugin must start and serve its metrics, and blue's victim
// keep running.
func TestNodePluginOnTheHostSide(t *testing.T) {
	s := setup(t)
	node := s.env.Nodes[0]
	host := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(host, []byte("root:x:0:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ name, plant string }{
		{"region replaced by a symlink to a host file, then the plugin restarts", "slice-attack symlink " + host + " " + regionFile},
		{"region replaced by a FIFO, then the plugin restarts", "slice-attack mkfifo " + regionFile},
	} {
		t.Run(c.name, func(t *testing.T) {
			row := attack(t, "node plugin (host side)", contained)
			ctx := context.Background()
			name := fmt.Sprintf("h-%d", i)
			pod := attackPod(name, name, "slice-attack unlink "+regionFile+" && "+c.plant+" && exec slice-attack wait-file /tmp/never 600")
			if _, err := s.alice.ResourceV1().ResourceClaimTemplates(red).Create(ctx, claimTemplate(name, pkgQuarter, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = s.admin.ResourceV1().ResourceClaimTemplates(red).Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			if _, err := s.alice.CoreV1().Pods(red).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.deletePod(t, red, name) })
			realnodetest.Eventually(t, 2*time.Minute, "the plant in pod "+name, func() (bool, string) {
				logs, err := s.admin.CoreV1().Pods(red).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
				return strings.Count(string(logs), ": DONE") == 2, fmt.Sprint(string(logs), err)
			})

			node.KillNodePlugin()
			startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := node.StartNodePlugin(startCtx); err != nil {
				t.Fatalf("the node plugin did not start again: %v", err)
			}
			if _, err := realnodetest.ReadMetrics(node); err != nil {
				t.Fatalf("the node plugin's metrics: %v", err)
			}
			st, err := os.Stat(host)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(host); st.Mode().Perm() != 0o600 || string(b) != "root:x:0:0" {
				t.Fatalf("the host file changed: mode %v, content %q", st.Mode().Perm(), b)
			}
			s.victimUntouched(t)
			row.detail = "the plugin started again, serves its metrics, the host file is unchanged"
		})
	}
}
