package acme

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// certmagic's zap lines come out as edgeq's slog lines: the level mapped, below the handler's level
// dropped, fields (and those of With) as attributes, the logger's name kept.
func TestZapLogger_WritesToSlog(t *testing.T) {
	var out bytes.Buffer
	l := zapLogger(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Debug("dropped")
	l.Named("obtain").With(zap.String("identifier", "shop.test")).Warn("could not get certificate",
		zap.Int("attempt", 2), zap.Strings("names", []string{"a", "b"}))
	l.Error("failed")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", lines)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "WARN", "msg": "could not get certificate", "logger": "obtain",
		"identifier": "shop.test", "attempt": float64(2)}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("%s = %v, want %v (%s)", k, first[k], v, lines[0])
		}
	}
	if names, _ := first["names"].([]any); len(names) != 2 {
		t.Errorf("names = %v", first["names"])
	}
	if !strings.Contains(lines[1], `"level":"ERROR"`) {
		t.Errorf("error line: %s", lines[1])
	}
}

// A TLS-ALPN-01 check offers acme-tls/1 alone and names the host; a browser offering it among others
// (or a client naming no host) is not one.
func TestIsChallenge(t *testing.T) {
	cases := []struct {
		hello tls.ClientHelloInfo
		want  bool
	}{
		{tls.ClientHelloInfo{ServerName: "shop.test", SupportedProtos: []string{ALPN}}, true},
		{tls.ClientHelloInfo{ServerName: "", SupportedProtos: []string{ALPN}}, false},
		{tls.ClientHelloInfo{ServerName: "shop.test", SupportedProtos: []string{"h2", ALPN}}, false},
		{tls.ClientHelloInfo{ServerName: "shop.test", SupportedProtos: []string{"h2", "http/1.1"}}, false},
	}
	for _, c := range cases {
		if got := IsChallenge(&c.hello); got != c.want {
			t.Errorf("%q %q: %v, want %v", c.hello.ServerName, c.hello.SupportedProtos, got, c.want)
		}
	}
}
