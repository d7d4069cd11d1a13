// Package proc runs the local cluster's components (control plane, kubelet,
// containerd, node plugins) as child processes, each with its output in a
// log file, stopped by PID.
package proc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one component running as a child process.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error // set before exited is closed
}

// Run starts binary with args, its output appended to logDir/<name>.log.
func Run(name, binary, logDir string, args []string) (*Process, error) {
	return Start(name, exec.Command(binary, args...), logDir)
}

// Start starts cmd, its output appended to logDir/<name>.log. The child gets
// a process group of its own, so a Ctrl-C in the terminal reaches the owner
// (which stops components in order) and not every child at once, and dies
// with its owner.
func Start(name string, cmd *exec.Cmd, logDir string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	// Append: a restarted component keeps its earlier log.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log for %s: %w", name, err)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, cmd.Path, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// Restart starts a new process like p (same command line, environment and
// log) once p has exited.
func (p *Process) Restart() (*Process, error) {
	<-p.exited
	cmd := exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
	cmd.Args, cmd.Env, cmd.Dir = p.cmd.Args, p.cmd.Env, p.cmd.Dir
	if p.cmd.SysProcAttr != nil {
		attr := *p.cmd.SysProcAttr
		cmd.SysProcAttr = &attr
	}
	return Start(p.Name, cmd, filepath.Dir(p.LogPath))
}

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Stop asks the process to exit (SIGTERM) and kills it when it does not
// within grace.
func (p *Process) Stop(grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Kill ends the process at once, as a crash would, and waits for it.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// ExitError describes why the process is no longer running; nil while it
// runs.
func (p *Process) ExitError() error {
	if p.Running() {
		return nil
	}
	if p.err == nil {
		return fmt.Errorf("%s exited unexpectedly", p.Name)
	}
	return fmt.Errorf("%s exited: %w", p.Name, p.err)
}

// LogTail returns the last lines of the process's log.
func (p *Process) LogTail(lines int) string { return TailFile(p.LogPath, lines) }

// TailFile returns the last lines of a file, or why it cannot be read.
func TailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	data = bytes.TrimRight(data, "\n")
	all := strings.Split(string(data), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
