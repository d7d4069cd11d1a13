// Command gpuslice is the command-line front end of gpuslice: it reads the
// same HCL as the Terraform provider and plans, applies and diagnoses it
// against a cluster, or runs a local one for trying it out.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// version is set by make release (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	setGCPercent(os.Getenv)
	root := &cobra.Command{
		Use:           "gpuslice",
		Version:       version,
		Short:         "Shared NVIDIA GPUs on Kubernetes, declared in HCL",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newValidateCommand(), newPlanCommand(), newApplyCommand(), newDestroyCommand(),
		newStatusCommand(), newReconcileCommand(), newForceUnlockCommand(), newDevCommand(), newGPUCommand())
	root.SetArgs(terraformStyleFlags(os.Args[1:]))
	err := root.Execute()
	var code exitCode
	switch {
	case err == nil:
	case errors.As(err, &code):
		os.Exit(int(code))
	case errors.Is(err, errReported):
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// terraformStyleFlags accepts Terraform's single-dash long flags
// (-var, -auto-approve, -detailed-exitcode) by doubling the dash.
func terraformStyleFlags(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 {
				a = "-" + a
			}
		}
		out[i] = a
	}
	return out
}
