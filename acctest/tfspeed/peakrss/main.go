// Command peakrss runs a command and writes its peak resident memory to a
// file: peakrss REPORT COMMAND [ARG...]. It exits with the command's exit
// status (128 + the signal that ended it).
//
// The report has three lines, in bytes: "peak" is the kernel's peak RSS of
// the command (and of the children it waited for); "anon" and "file" are
// the largest anonymous and file-backed resident memory of the command's
// own process, read from /proc every few milliseconds while it runs. For
// a static binary the file-backed pages are the binary's own, which is
// what two tools of different sizes do not share: a plan's data is in
// "anon".
//
// The benchmarks cannot take a command's peak from the rusage their own
// wait returns: Go starts a process with vfork, and Linux records the
// forking process's peak into the child's when the child calls exec, so
// every command a benchmark of 100 MiB starts would report at least
// 100 MiB. This process is small; what it records into the command is
// its own few MiB.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// every is how often the command's resident memory is read.
const every = 5 * time.Millisecond

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: peakrss REPORT COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	sampled := make(chan resident)
	done := make(chan struct{})
	go sample(cmd.Process.Pid, done, sampled)
	err := cmd.Wait()
	close(done)
	most := <-sampled
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	report := fmt.Sprintf("peak %d\nanon %d\nfile %d\n", ru.Maxrss<<10, most.anon, most.file) // Maxrss in KiB on Linux
	if err := os.WriteFile(os.Args[1], []byte(report), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	status := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if status.Signaled() {
		os.Exit(128 + int(status.Signal()))
	}
	os.Exit(status.ExitStatus())
}

// resident is anonymous and file-backed resident memory, in bytes.
type resident struct{ anon, file int64 }

// sample reads the process's resident memory until done and sends the
// largest of each kind. It reads through a handle on the process's /proc
// directory, opened once, so that it never reads another process that
// took the same pid after this one ended.
func sample(pid int, done <-chan struct{}, out chan<- resident) {
	var most resident
	defer func() { out <- most }()
	proc, err := os.OpenRoot("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return
	}
	defer proc.Close()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if data, err := proc.ReadFile("status"); err == nil {
			r := parseStatus(data)
			most.anon, most.file = max(most.anon, r.anon), max(most.file, r.file)
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// parseStatus reads RssAnon and RssFile (in kB) from /proc/PID/status.
func parseStatus(data []byte) resident {
	var r resident
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		fields := bytes.Fields(value)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			continue
		}
		switch string(key) {
		case "RssAnon":
			r.anon = kb << 10
		case "RssFile":
			r.file = kb << 10
		}
	}
	return r
}
