// Command peakrss runs a command and writes its peak resident memory, in
// bytes, to a file: peakrss REPORT COMMAND [ARG...]. It exits with the
// command's exit status (128 + the signal that ended it).
//
// The benchmarks cannot take a command's peak from the rusage their own
// wait returns: Go starts a process with vfork, and Linux records the
// forking process's peak into the child's when the child calls exec, so
// every command a benchmark of 100 MiB starts would report at least
// 100 MiB. This process is small; what it records into the command is
// its own few MiB.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: peakrss REPORT COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if err := os.WriteFile(os.Args[1], []byte(strconv.FormatInt(ru.Maxrss<<10, 10)), 0o644); err != nil { // KiB on Linux
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	status := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if status.Signaled() {
		os.Exit(128 + int(status.Signal()))
	}
	os.Exit(status.ExitStatus())
}
