package tfspeed

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/gpuslice/gpuslice/provider"
)

// profilePlan runs one more no-change `tofu plan` against the provider
// served in this process (Terraform reattaches to it, as to a provider run
// under a debugger) and writes its CPU profile to the file
// GPUSLICE_BENCH_CPUPROFILE names, suffixed with the size: the provider's
// own profile, without a flag in the user's binary; OpenTofu's own
// (TOFU_CPU_PROFILE) goes beside it, suffixed ".tofu", and the
// provider's allocation profiles before and after the plan, suffixed
// ".allocs.before" and ".allocs". The measured plans above run the
// installed provider, as a user would.
//
//	GPUSLICE_BENCH_CPUPROFILE=/tmp/plan.pprof GPUSLICE_BENCH_SIZES=200 go test -run '^$' -bench TerraformSpeed -benchtime 1x ./acctest/tfspeed/
//	go tool pprof -top /tmp/plan.pprof.200
//	go tool pprof -top -sample_index=alloc_space -diff_base /tmp/plan.pprof.200.allocs.before /tmp/plan.pprof.200.allocs
func profilePlan(b *testing.B, env []string, suffix string, tofu func(env []string, allowed []int, args ...string)) {
	b.Helper()
	out := os.Getenv("GPUSLICE_BENCH_CPUPROFILE")
	if out == "" {
		return
	}
	// The provider logs at the levels env gives tofu's provider (the SDK's
	// own lines left out), to this process's stderr.
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "TF_LOG_") && k != "TF_LOG_PATH" {
			b.Setenv(k, v)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go func() {
		server, err := provider.NewServer(provider.New("bench")())()
		if err != nil {
			b.Errorf("provider server: %v", err)
			return
		}
		err = tf6server.Serve(provider.Address, func() tfprotov6.ProviderServer { return server },
			tf6server.WithDebug(ctx, reattach, closed), tf6server.WithoutLogStderrOverride())
		if err != nil {
			b.Errorf("serve the provider in process: %v", err)
		}
	}()
	var cfg *plugin.ReattachConfig
	select {
	case cfg = <-reattach:
	case <-closed:
		b.Fatal("the in-process provider stopped before it served")
	}
	value, err := json.Marshal(map[string]any{provider.Address: map[string]any{
		"Protocol": string(cfg.Protocol), "ProtocolVersion": cfg.ProtocolVersion, "Pid": cfg.Pid, "Test": true,
		"Addr": map[string]string{"Network": cfg.Addr.Network(), "String": cfg.Addr.String()},
	}})
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(out + "." + suffix)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	writeAllocs(b, out+"."+suffix+".allocs.before")
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	tofu(append(env, "TF_REATTACH_PROVIDERS="+string(value), "TOFU_CPU_PROFILE="+out+"."+suffix+".tofu"), []int{0}, "plan", "-detailed-exitcode")
	pprof.StopCPUProfile()
	writeAllocs(b, out+"."+suffix+".allocs")
	cancel()
	<-closed
}

// writeAllocs writes this process's allocation profile so far to path:
// the plan's own are those after it less those before it (go tool pprof
// -diff_base FILE.allocs.before FILE.allocs).
func writeAllocs(b *testing.B, path string) {
	b.Helper()
	runtime.GC() // the profile counts what the last collection saw
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
