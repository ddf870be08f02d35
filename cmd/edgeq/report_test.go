package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/report"
)

// `edgeq report` writes a queue's report page as one file, and says in one line why it cannot.
func TestReport_WritesTheFileAndRefusesWhatItCannot(t *testing.T) {
	if code, _, stderr := runEdgeq(t, "report", "-config", "../../config.example.yaml"); code != 2 ||
		!strings.Contains(stderr, "-queue ID and -out FILE are required") {
		t.Fatalf("without -queue: exit %d %s", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "report.html")
	if code, _, stderr := runEdgeq(t, "report", "-config", "../../config.example.yaml", "-queue", "drop", "-out", out); code != 1 ||
		!strings.Contains(stderr, "embedded store") {
		t.Fatalf("on the embedded store: exit %d %s", code, stderr)
	}

	addr := privateRedis(t).Addr()
	prefix := "edgeq"
	config := filepath.Join(t.TempDir(), "edgeq.yaml")
	text := fmt.Sprintf("redis: {addr: %q, key_prefix: %q}\norigin: {url: \"http://127.0.0.1:3000\"}\n", addr, prefix)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runEdgeq(t, "report", "-config", config, "-queue", "drop", "-out", out); code != 1 ||
		!strings.Contains(stderr, "QUEUE_NOT_FOUND") {
		t.Fatalf("a queue with nothing: exit %d %s", code, stderr)
	}
	if code, _, stderr := runEdgeq(t, "report", "-config", config, "-queue", "drop", "-from", "yesterday", "-out", out); code != 1 ||
		!strings.Contains(stderr, "from must be an RFC 3339 time") {
		t.Fatalf("a bad -from: exit %d %s", code, stderr)
	}

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	tally := report.NewTally()
	tally.Scope(report.Queue, "drop").Add(report.Joined, 3)
	tally.Scope(report.Queue, "drop").Add(report.Served, 2)
	w := report.Writer{Client: client, Keys: store.Keys{Prefix: prefix}, Retention: time.Hour}
	w.Flush(context.Background(), tally, report.Queue, nil)
	code, stdout, stderr := runEdgeq(t, "report", "-config", config, "-queue", "drop", "-out", out)
	if code != 0 || !strings.Contains(stdout, "wrote "+out) {
		t.Fatalf("exit %d %s %s", code, stdout, stderr)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "3 joined, 2 served") || strings.Contains(string(page), "<form") {
		t.Fatalf("the file: %.600s", page)
	}
}
