//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// 20 clients that read nothing of a 4 MiB answer (receive buffers as small as the
// kernel allows) on a max_in_flight: 1 route. edgeq holds each answer in memory and gives the slot
// back, so each of them reaches the shop in turn and another client is still served within 5 s;
// edgeq's resident memory (a process of its own, /proc/PID/status) grows by about what it holds for
// them: 20 answers of 4 MiB, within the spool budget.
func TestSlowReaders_TwentyStalledReadersKeepMemoryBounded(t *testing.T) {
	const size, readers = 4 << 20, 20
	var finished atomic.Int64
	payload := strings.Repeat("x", size)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		if _, err := io.WriteString(w, payload); err == nil {
			finished.Add(1)
		}
	}))
	defer origin.Close()
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 2s}
admin: {listen: "127.0.0.1:0"}
origin: {url: %q}
redis: {addr: %q}
routes:
  - {name: big, match: "GET /big", max_in_flight: 1, hold: 2s}
`, origin.URL, privateRedis(t).Addr())), 0o644)
	public, admin, pid := serveProcess(t, path)

	getBig := func() (int, int64, time.Duration) {
		began := time.Now()
		client := &http.Client{Timeout: 10 * time.Second}
		resp, err := client.Get("http://" + public + "/big")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, n, time.Since(began)
	}
	if status, n, _ := getBig(); status != 200 || n != size { // warm up: pools, connections
		t.Fatalf("first answer: %d, %d bytes", status, n)
	}
	before, heapBefore := residentKiB(t, pid, "VmRSS"), heapInUse(t, admin)

	for i := range readers {
		conn := stalledConn(t, public)
		defer conn.Close()
		deadline := time.Now().Add(10 * time.Second)
		for finished.Load() < int64(i+2) {
			if time.Now().After(deadline) {
				t.Fatalf("stalled reader %d: the shop has not finished its answer after 10s (%d finished)", i+1, finished.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	status, n, took := getBig()
	if status != 200 || n != size || took > 5*time.Second {
		t.Fatalf("with %d stalled readers: %d, %d bytes after %v; want 200 with %d bytes within 5s", readers, status, n, took, size)
	}
	after, peak, heapAfter := residentKiB(t, pid, "VmRSS"), residentKiB(t, pid, "VmHWM"), heapInUse(t, admin)
	grew := (after - before) / 1024
	t.Logf("edgeq with %d stalled readers of %d MiB answers: resident %d MiB before, %d MiB after (+%d MiB), peak %d MiB; "+
		"Go heap in use %d MiB before, %d MiB after; race detector %v",
		readers, size>>20, before/1024, after/1024, grew, peak/1024, heapBefore>>20, heapAfter>>20, raceDetector)
	// edgeq holds at most the 80 MiB of the answers (less: the kernel's socket buffers took the start of
	// each), in chunks that are live until taken; what else the heap holds is small. An unbounded spool,
	// or an answer held twice, goes past these. The process may reside in up to twice its heap (GOGC
	// 100), and the race detector's shadow memory triples that.
	heapLimit := int64(readers*size>>20) + 32
	residentLimit := 2 * heapLimit
	if raceDetector {
		residentLimit *= 3
	}
	if heapGrew := (heapAfter - heapBefore) >> 20; heapGrew > heapLimit || grew > residentLimit || peak/1024-before/1024 > residentLimit {
		t.Fatalf("the heap grew by %d MiB (at most %d), resident memory by %d MiB, peak %d MiB (at most %d more)",
			heapGrew, heapLimit, grew, peak/1024, residentLimit)
	}
}

// heapInUse reads go_memstats_heap_inuse_bytes from edgeq's admin /metrics.
func heapInUse(t *testing.T, admin string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		if value, ok := strings.CutPrefix(lines.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int64(f)
		}
	}
	t.Fatal("no go_memstats_heap_inuse_bytes in /metrics")
	return 0
}

// serveProcess starts `edgeq serve` like serveReplica and also returns the process id.
func serveProcess(t *testing.T, path string) (public, admin string, pid int) {
	t.Helper()
	cmd := edgeq("serve", "-config", path)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	public, admin = waitForListeners(t, stderr)
	return public, admin, cmd.Process.Pid
}

// stalledConn sends GET /big on a connection whose receive buffer is as small as the kernel allows,
// and never reads.
func stalledConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		})
		return err
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET /big HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		t.Fatal(err)
	}
	return conn
}

// residentKiB reads one kB field of /proc/PID/status (VmRSS: resident now, VmHWM: the peak).
func residentKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
