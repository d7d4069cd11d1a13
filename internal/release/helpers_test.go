package release

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/release/releasetest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// testVersion is the version the tests release.
const testVersion = "0.1.0"

// testKey is a throwaway OpenPGP key, made once per test binary.
var testKey = sync.OnceValues(func() (*openpgp.Entity, error) {
	return openpgp.NewEntity("gpuslice release test", "", "release@gpuslice.test", &packet.Config{RSABits: 2048})
})

// newSigner is a Signer of a fresh throwaway key (or of the shared one).
func newSigner(t *testing.T, fresh bool) *Signer {
	t.Helper()
	e, err := testKey()
	if fresh {
		e, err = openpgp.NewEntity("someone else", "", "other@gpuslice.test", &packet.Config{RSABits: 2048})
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(armorPrivate(t, e), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func armorPrivate(t *testing.T, e *openpgp.Entity) string { return releasetest.Armor(t, e) }

// moduleDir is the root of the gpuslice module.
func moduleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "go.mod") {
		testenv.Unavailable(t, "go env GOMOD: %v (%s): the release tests build with the go command", err, out)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// tofu runs bin/tofu in dir with only the environment the test gives it.
func tofu(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	bin, err := cluster.ToolPath(cluster.FindBinDir(), cluster.Tofu)
	if err != nil {
		testenv.Unavailable(t, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1"}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
