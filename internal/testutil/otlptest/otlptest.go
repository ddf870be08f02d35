// Package otlptest starts a real OTLP receiver for tests: the OpenTelemetry Collector's own OTLP
// receiver (gRPC and HTTP), in the small program of ./receiver, which keeps the spans it takes and
// serves them back as JSON. The program is a Go module of its own, so the Collector's dependencies
// stay out of edgeq's go.mod; it is built once per test process (`go build -C receiver`, from the
// module cache or the module proxy). A build that fails is a test failure in CI (CI set) and a skip,
// with the reason, elsewhere.
package otlptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/proc"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// Span is one span the receiver took (the receiver's JSON: Span, Event and Link are the receiver's
// own, copied, since it is a module of its own).
type Span struct {
	Service    string            `json:"service"`
	TraceID    string            `json:"trace_id"`
	SpanID     string            `json:"span_id"`
	ParentID   string            `json:"parent_id"`
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	Status     string            `json:"status"`
	Attributes map[string]string `json:"attributes"`
	Events     []Event           `json:"events"`
	Links      []Link            `json:"links"`
	Resource   map[string]string `json:"resource"`
}

// Event is a span event.
type Event struct {
	Name       string            `json:"name"`
	Attributes map[string]string `json:"attributes"`
}

// Link is a span link.
type Link struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

// Receiver is a running receiver.
type Receiver struct {
	// GRPC and HTTP are the OTLP endpoints, host:port on 127.0.0.1.
	GRPC, HTTP string
	query      string
	process    *proc.Process
}

// HTTPEndpoint is the OTLP/HTTP endpoint as tracing.endpoint takes it.
func (r *Receiver) HTTPEndpoint() string { return "http://" + r.HTTP }

// GRPCEndpoint is the OTLP/gRPC endpoint as tracing.endpoint takes it.
func (r *Receiver) GRPCEndpoint() string { return "http://" + r.GRPC }

var built struct {
	once sync.Once
	bin  string
	err  error
}

// binary builds the receiver once per process.
func binary() (string, error) {
	built.once.Do(func() {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			built.err = fmt.Errorf("otlptest: cannot locate the receiver's source")
			return
		}
		dir, err := os.MkdirTemp("", "edgeq-otlp-receiver-")
		if err != nil {
			built.err = err
			return
		}
		built.bin = filepath.Join(dir, "receiver")
		cmd := exec.Command("go", "build", "-C", filepath.Join(filepath.Dir(file), "receiver"), "-o", built.bin, ".")
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("otlptest: building the OTLP receiver (internal/testutil/otlptest/receiver): %v\n%s", err, out)
		}
	})
	return built.bin, built.err
}

// Start runs a receiver until t ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	bin, err := binary()
	if err != nil {
		if storetest.InCI() {
			t.Fatalf("%v\n(in CI the receiver must build: the module proxy and the Go toolchain are there)", err)
		}
		t.Skipf("no OTLP receiver to test against: %v", err)
	}
	r := &Receiver{GRPC: proc.FreeAddr(t), HTTP: proc.FreeAddr(t), query: proc.FreeAddr(t)}
	cmd := exec.Command(bin, "-grpc", r.GRPC, "-http", r.HTTP, "-query", r.query)
	r.process, err = proc.StartReady(cmd, 30*time.Second, 50*time.Millisecond, func() error {
		resp, err := http.Get("http://" + r.query + "/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ready: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("otlptest: %v", err)
	}
	t.Cleanup(func() { r.process.Stop(syscall.SIGTERM, 5*time.Second) })
	return r
}

// Spans are every span received so far.
func (r *Receiver) Spans(t testing.TB) []Span {
	t.Helper()
	resp, err := http.Get("http://" + r.query + "/spans")
	if err != nil {
		t.Fatalf("otlptest: reading spans: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var spans []Span
	if err := json.NewDecoder(resp.Body).Decode(&spans); err != nil {
		t.Fatalf("otlptest: reading spans: %v", err)
	}
	return spans
}

// WaitFor waits until the spans received satisfy cond, and returns them; what names the condition
// for the failure message, which lists the spans received.
func (r *Receiver) WaitFor(t testing.TB, what string, cond func([]Span) bool) []Span {
	t.Helper()
	var spans []Span
	ok := false
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if spans = r.Spans(t); cond(spans) {
			ok = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !ok {
		t.Fatalf("otlptest: %s did not happen within 30s; spans received:\n%s", what, Describe(spans))
	}
	return spans
}

// Describe lists spans one a line, for failure messages.
func Describe(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s %q trace=%s span=%s parent=%s %v\n", s.Service, s.Kind, s.Name, s.TraceID, s.SpanID,
			s.ParentID, s.Attributes)
	}
	return b.String()
}
