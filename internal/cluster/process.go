package cluster

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

// process is one control-plane component running as a child process with its
// output in a log file inside the cluster directory.
type process struct {
	name    string
	binary  string
	args    []string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error // set before exited is closed
}

func startProcess(name, binary, logDir string, args []string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	// Append: a restarted component keeps its earlier log.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log for %s: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so a Ctrl-C in the terminal reaches the owner
		// (which stops components in order) and not every child at once.
		Setpgid: true,
		// If the owning process dies without stopping us, do not linger.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, binary, err)
	}
	p := &process{name: name, binary: binary, args: args, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop asks the component to exit and kills it when it does not within grace.
func (p *process) stop(grace time.Duration) {
	if !p.running() {
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

// exitError describes why a component is no longer running, for start-up
// failures.
func (p *process) exitError() error {
	if p.running() {
		return nil
	}
	if p.err == nil {
		return fmt.Errorf("%s exited unexpectedly", p.name)
	}
	return fmt.Errorf("%s exited: %w", p.name, p.err)
}

// logTail returns the last lines of the component's log.
func (p *process) logTail(lines int) string {
	return tailFile(p.logPath, lines)
}

func tailFile(path string, lines int) string {
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
