package hclstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMultiGPUAndWorkersErrors: gpus_per_pod and workers are checked with
// errors naming the attribute, and a distributed job's rendezvous
// variables are the engine's.
func TestMultiGPUAndWorkersErrors(t *testing.T) {
	with := func(lines string) string {
		return base + strings.Replace(goodWorkload, "  container {", lines+"\n  container {", 1)
	}
	cases := []struct {
		name, tf string
		want     []string
	}{
		{"no GPUs per pod", with("  gpus_per_pod = 0"), []string{"gpuslice_workload.w.gpus_per_pod: Invalid GPU count", "0: use 1 to 16 whole GPUs per pod"}},
		{"workers of a deployment", with("  workers = 2"), []string{"gpuslice_workload.w.workers: Workers need kind = \"job\"", "set kind = \"job\""}},
		{"no workers", with("  kind = \"job\"\n  workers = 0"), []string{"gpuslice_workload.w.workers: Invalid worker count"}},
		{"replicas and workers", with("  kind = \"job\"\n  workers = 2\n  replicas = 2"), []string{"gpuslice_workload.w.replicas: Replicas and workers both set", "keep workers = 2"}},
		{"rendezvous variable set", strings.Replace(with("  kind = \"job\"\n  workers = 2"), `image = "ollama/ollama:0.24.0"`, "image = \"ollama/ollama:0.24.0\"\n    env = { WORLD_SIZE = \"8\" }", 1),
			[]string{`gpuslice_workload.w.container.env["WORLD_SIZE"]: Reserved environment variable`, "set by gpuslice in every worker of a distributed training job"}},
		{"training operator without workers", with("  kind = \"job\"\n  training_operator = \"pytorchjob\""),
			[]string{"gpuslice_workload.w.training_operator: Training operator without workers", "workers = 2 or more, or remove training_operator"}},
		{"unknown training operator", with("  kind = \"job\"\n  workers = 2\n  training_operator = \"tfjob\""),
			[]string{"gpuslice_workload.w.training_operator: Invalid training operator", `"tfjob": use "trainjob" (Kubeflow Trainer's TrainJob), "pytorchjob"`}},
		{"rendezvous variable set for a PyTorchJob", strings.Replace(with("  kind = \"job\"\n  workers = 2\n  training_operator = \"pytorchjob\""), `image = "ollama/ollama:0.24.0"`, "image = \"ollama/ollama:0.24.0\"\n    env = { RANK = \"0\" }", 1),
			[]string{`gpuslice_workload.w.container.env["RANK"]: Reserved environment variable`, "for a PyTorchJob the Kubeflow Training Operator sets it"}},
		{"rendezvous variable set for a TrainJob", strings.Replace(with("  kind = \"job\"\n  workers = 2\n  training_operator = \"trainjob\""), `image = "ollama/ollama:0.24.0"`, "image = \"ollama/ollama:0.24.0\"\n    env = { PET_NODE_RANK = \"0\" }", 1),
			[]string{`gpuslice_workload.w.container.env["PET_NODE_RANK"]: Reserved environment variable`, "for a TrainJob Kubeflow Trainer"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(tc.tf), 0o644); err != nil {
				t.Fatal(err)
			}
			_, diags := Load(dir, Options{VarOptions: VarOptions{Env: []string{}}})
			errs := diags.Errors()
			if len(errs) != 1 {
				t.Fatalf("want 1 error, got %d:\n%v", len(errs), diags.Err())
			}
			for _, w := range tc.want {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("error lacks %q:\n%s", w, errs[0].Error())
				}
			}
		})
	}
	// A training job with the environment of its own is fine.
	dir := t.TempDir()
	tf := strings.Replace(with("  kind = \"job\"\n  workers = 2\n  gpus_per_pod = 2"), `image = "ollama/ollama:0.24.0"`, "image = \"ollama/ollama:0.24.0\"\n    env = { NCCL_DEBUG = \"INFO\" }", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(tf), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, diags := Load(dir, Options{VarOptions: VarOptions{Env: []string{}}}); diags.HasErrors() {
		t.Fatal(diags.Err())
	} else if w := c.Stack.Workloads[0]; w.Workers != 2 || w.GPUsPerPod != 2 || !w.Distributed() || w.Slices() != 4 {
		t.Errorf("decoded workers %d, gpus_per_pod %d, slices %d", w.Workers, w.GPUsPerPod, w.Slices())
	}
}
