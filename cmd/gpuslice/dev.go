package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// devCommand is the program that runs the local cluster. It is separate so
// that this binary carries no control-plane launcher, kubelet plumbing or
// simulated GPUs.
const devCommand = "gpuslice-dev"

// newDevCommand hands `gpuslice dev …` to gpuslice-dev, found beside this
// executable (make build puts both in bin/) or on PATH.
func newDevCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "dev",
		Short:              "Run a local Kubernetes cluster for trying gpuslice (runs " + devCommand + ": up, down, env, demo)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := findDevCommand()
			if err != nil {
				return err
			}
			// Exec, not a child: signals, exit codes and the terminal are
			// gpuslice-dev's own.
			return syscall.Exec(path, append([]string{devCommand}, args...), os.Environ())
		},
	}
}

func findDevCommand() (string, error) {
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), devCommand)
		if info, err := os.Stat(beside); err == nil && !info.IsDir() {
			return beside, nil
		}
	}
	path, err := exec.LookPath(devCommand)
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("`gpuslice dev` runs %s, which is neither beside this gpuslice nor on PATH: run `make build` in the gpuslice repository (it puts both in bin/) or `go install github.com/gpuslice/gpuslice/cmd/%s`", devCommand, devCommand)
	}
	return path, err
}
