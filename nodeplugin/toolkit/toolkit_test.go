package toolkit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/toolkit"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		open         bool
		err          string
	}{
		{name: "closed", config: "accept-nvidia-visible-devices-envvar-when-unprivileged = false\naccept-nvidia-visible-devices-as-volume-mounts = true\n[nvidia-container-runtime]\nmode = \"cdi\"\n"},
		{name: "open explicitly", config: "accept-nvidia-visible-devices-envvar-when-unprivileged = true\n", open: true},
		// The toolkit's own default, as `nvidia-ctk config default` writes it.
		{name: "open by default", config: "disable-require = false\n[nvidia-container-runtime]\nmode = \"auto\"\n", open: true},
		{name: "not a boolean", config: "accept-nvidia-visible-devices-envvar-when-unprivileged = \"no\"\n", err: "not a boolean"},
		{name: "damaged", config: "accept-nvidia-visible-devices-envvar-when-unprivileged = \n", err: "parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(path, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := toolkit.Check(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and %q", err, path, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Open != tc.open || !strings.Contains(f.Reason, toolkit.EnvKey) {
				t.Errorf("finding %+v, want open=%v with a reason naming %s", f, tc.open, toolkit.EnvKey)
			}
		})
	}
	// A node without the toolkit has no runtime to honour the variable.
	f, err := toolkit.Check(filepath.Join(t.TempDir(), "absent.toml"))
	if err != nil || f.Open {
		t.Errorf("no configuration: %+v, %v; want closed", f, err)
	}
}
