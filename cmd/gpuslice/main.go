// Command gpuslice is the command-line front end of gpuslice.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "gpuslice",
		Short:         "Shared NVIDIA GPUs on Kubernetes, declared in HCL",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
