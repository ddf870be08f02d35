package proc

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/wait"
)

// gone reports whether no process has the id pid any more (it ended and was reaped).
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

func fileExists(path string) func() error {
	return func() error {
		_, err := os.Stat(path)
		return err
	}
}

// A server that comes up is returned running; Kill ends it, and may be called again.
func TestStartReady_WaitsForTheCheckThenKillEndsIt(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	p, err := StartReady(exec.Command("sh", "-c", "sleep 0.2; touch "+ready+"; exec sleep 60"), 10*time.Second, 10*time.Millisecond, fileExists(ready))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ready); err != nil {
		t.Fatalf("returned before the check passed: %v", err)
	}
	if ended, err := p.ended(); ended {
		t.Fatalf("the server ended after it was ready: %v", err)
	}
	p.Kill()
	p.Kill()
	if !gone(p.Pid()) {
		t.Fatalf("pid %d still exists after Kill", p.Pid())
	}
}

// A server that ends before it is ready fails at once, with its output.
func TestStartReady_AProcessThatExitsIsNamedWithItsOutput(t *testing.T) {
	start := time.Now()
	_, err := StartReady(exec.Command("sh", "-c", "echo 'FATAL: no such option' >&2; exit 3"), 10*time.Second, 10*time.Millisecond,
		func() error { return errors.New("not listening") })
	if err == nil {
		t.Fatal("a server that exited was taken for ready")
	}
	for _, want := range []string{"sh (pid ", "exited before it was ready", "exit status 3", "FATAL: no such option"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("an exited server was waited for %s", time.Since(start))
	}
}

// A server that does not come up within the bound is killed, and the error says what the check said
// last and what the server wrote.
func TestStartReady_NotReadyWithinTheBoundIsKilled(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	_, err := StartReady(exec.Command("sh", "-c", "echo $$ > "+pidFile+"; echo starting; exec sleep 60"), 300*time.Millisecond, 10*time.Millisecond,
		func() error { return errors.New("connection refused") })
	if err == nil {
		t.Fatal("a server that never passed its check was taken for ready")
	}
	for _, want := range []string{"was not ready within 300ms", "connection refused", "starting"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	text, readErr := os.ReadFile(pidFile)
	pid, convErr := strconv.Atoi(strings.TrimSpace(string(text)))
	if readErr != nil || convErr != nil {
		t.Fatalf("the server's pid: %v %v", readErr, convErr)
	}
	if !gone(pid) {
		t.Fatalf("the server (pid %d) was left running", pid)
	}
}

// Stop asks first; a process that ignores the signal is killed after the grace, with its whole group
// when it was started in one (and Stop does not wait on a child holding the output pipe).
func TestStop_SignalThenKill(t *testing.T) {
	trapped := filepath.Join(t.TempDir(), "trapped")
	polite, err := StartReady(exec.Command("sh", "-c", "trap 'exit 0' TERM; touch "+trapped+"; while :; do sleep 0.05; done"),
		10*time.Second, 10*time.Millisecond, fileExists(trapped))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	polite.Stop(syscall.SIGTERM, time.Minute)
	if time.Since(start) > 30*time.Second {
		t.Fatalf("a process that exits on SIGTERM took %s to stop", time.Since(start))
	}
	if err := polite.wait(); err != nil {
		t.Fatalf("the process did not exit by itself on SIGTERM: %v", err)
	}

	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 60 & echo $! > "+pidFile+"; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stubborn, err := StartReady(cmd, 10*time.Second, 10*time.Millisecond, fileExists(pidFile))
	if err != nil {
		t.Fatal(err)
	}
	stubborn.Stop(syscall.SIGTERM, 100*time.Millisecond)
	if ended, _ := stubborn.ended(); !ended {
		t.Fatal("Stop returned before the process ended")
	}
	text, _ := os.ReadFile(pidFile)
	child, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatalf("the child's pid: %v", err)
	}
	// SIGKILL takes effect when the child next runs, and init reaps it later: it ends up gone or a zombie.
	wait.Until(t, 10*time.Second, "the process group's child ended", func() bool {
		state, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		return gone(child) || err != nil || strings.Contains(string(state), ") Z ")
	})
}

// Output keeps the end of what the process wrote, bounded.
func TestOutput_KeepsTheEnd(t *testing.T) {
	p, err := Start(exec.Command("sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done"))
	if err != nil {
		t.Fatal(err)
	}
	p.wait()
	out := p.Output()
	if len(out) > outputMax || !strings.HasSuffix(out, "line2999\n") || strings.Contains(out, "line0\n") {
		t.Fatalf("Output: %d bytes, ending %q", len(out), out[max(0, len(out)-20):])
	}
}

func TestFreePort_CanBeListenedOn(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d: %v", port, err)
	}
	l.Close()
}
