package gpuproof_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuslice/gpuslice/internal/testenv"
)

// A claim's container made by container.py has its own /run, as one a
// runtime makes: the accounting directory and the read-only limits are
// mounted there, and no mount point is made in (and later removed from)
// the host's /run, where make test's real nodes make and remove
// /run/gpuslice while gpu-proof runs beside them: gpu-proof once lost its
// /run/gpuslice mid-run that way.
func TestContainerHasItsOwnRun(t *testing.T) {
	prerequisites(t, "python3")
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "container.py run needs root (unshare(2), mount(2))")
	}
	accounting := t.TempDir()
	if err := os.WriteFile(filepath.Join(accounting, "gpuslice.limits"), []byte("the claim's limits\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{"env": []string{}, "mounts": []map[string]any{
		{"hostPath": accounting, "containerPath": "/run/gpuslice", "options": []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
		{"hostPath": filepath.Join(accounting, "gpuslice.limits"), "containerPath": "/run/gpuslice/gpuslice.limits", "options": []string{"ro", "nosuid", "nodev", "noexec", "bind"}},
	}})
	file := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(file, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	out := string(python(t, nil, nil, "container.py", "run", file, "--",
		"sh", "-c", "cat /run/gpuslice/gpuslice.limits; ls -A /run; (echo x > /run/gpuslice/gpuslice.limits) 2>/dev/null && echo writable; true"))
	if want := "the claim's limits\ngpuslice\n"; out != want {
		t.Errorf("in the container: %q, want the limits, read-only, and a /run holding only gpuslice: %q", out, want)
	}
	points := python(t, nil, nil, "-c", `import container, json, sys; json.dump(container.mount_points(json.load(open(sys.argv[1]))), sys.stdout)`, file)
	if string(points) != "[]" {
		t.Errorf("mount points to make on the host for mounts under /run: %s, want none", points)
	}
}
