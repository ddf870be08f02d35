// Package proc runs the server processes of tests and benchmarks (redis-server, PostgreSQL, the
// proxies edgeq-bench measures against): started so that they die with the process that started them,
// waited for until a readiness check passes within a bound, ended, and named with their output when
// they do not come up.
package proc

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// outputMax is how much of a process's output (its end) is kept for a failure message.
const outputMax = 16 << 10

// waitDelay bounds how long ending a process waits for its output pipe once the process itself has
// ended: a child it forked (a worker, a rewrite) may still hold the pipe.
const waitDelay = time.Second

// Process is a server process started by Start.
type Process struct {
	name   string
	cmd    *exec.Cmd
	exited chan error // cmd.Wait's result once the process has ended; whoever takes it puts it back
	out    *tail
}

// Start starts cmd. The process gets SIGKILL when the thread that started it ends (Pdeathsig, added to
// the caller's SysProcAttr), so a test binary that dies without cleaning up leaves no server behind.
// Its standard output and error, unless the caller set them, are kept (the last 16 KiB) for Output
// and the failure messages of WaitReady.
func Start(cmd *exec.Cmd) (*Process, error) {
	p := &Process{name: filepath.Base(cmd.Path), cmd: cmd, exited: make(chan error, 1), out: &tail{}}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if cmd.Stdout == nil {
		cmd.Stdout = p.out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.out
	}
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = waitDelay
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	return p, nil
}

// StartReady is Start, then WaitReady; a process that does not become ready is killed.
func StartReady(cmd *exec.Cmd, within, every time.Duration, ready func() error) (*Process, error) {
	p, err := Start(cmd)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(within, every, ready); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// WaitReady calls ready every interval until it returns nil. It fails when the process ends first, or
// when ready has not passed within within; the error names the process, what ready said last and the
// end of the process's output.
func (p *Process) WaitReady(within, every time.Duration, ready func() error) error {
	deadline := time.Now().Add(within)
	for {
		if ended, err := p.ended(); ended {
			return p.failure(fmt.Sprintf("exited before it was ready (%v)", err))
		}
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return p.failure(fmt.Sprintf("was not ready within %s (last check: %v)", within, err))
		}
		time.Sleep(every)
	}
}

func (p *Process) failure(what string) error {
	out := strings.TrimSpace(p.Output())
	if out == "" {
		out = "(none)"
	}
	return fmt.Errorf("%s (pid %d) %s; its output: %s", p.name, p.Pid(), what, out)
}

// ended reports whether the process has ended, and Wait's error if it has.
func (p *Process) ended() (bool, error) {
	select {
	case err := <-p.exited:
		p.exited <- err
		return true, err
	default:
		return false, nil
	}
}

// wait waits until the process has ended and returns Wait's error.
func (p *Process) wait() error {
	err := <-p.exited
	p.exited <- err
	return err
}

// Kill ends the process with SIGKILL, as a crash would (its whole process group when the caller
// started it in a group of its own, SysProcAttr.Setpgid), and waits until it has ended. It may be
// called again, and after the process ended by itself.
func (p *Process) Kill() {
	if ended, _ := p.ended(); !ended {
		if p.cmd.SysProcAttr.Setpgid {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		} else {
			_ = p.cmd.Process.Kill()
		}
	}
	_ = p.wait()
}

// Stop sends the process sig (a server's orderly shutdown) and waits until it has ended; after grace it
// kills it (Kill).
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) {
	if ended, _ := p.ended(); ended {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-time.After(grace):
		p.Kill()
	case err := <-p.exited:
		p.exited <- err
	}
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output is the end of what the process wrote to its standard output and error (when Start kept them).
func (p *Process) Output() string { return p.out.String() }

// FreePort returns a TCP port free on loopback a moment ago. Another process may take it before the
// server binds it: callers start again on another port when the server does not come up.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr is FreePort as an address, 127.0.0.1:port, for a test's server to listen on; it fails t
// (a testing.TB) when no port is free.
func FreeAddr(t interface {
	Helper()
	Fatal(args ...any)
}) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// tail keeps the last outputMax bytes written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > outputMax {
		t.b = append(t.b[:0:0], t.b[len(t.b)-outputMax:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
