package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The admin listener answered any Host, so a DNS rebinding page (evil.example
// resolving to the admin address after it loaded) could read /metrics and try the dashboard. Other
// names are refused with 421 MISDIRECTED_REQUEST on every path; IP literals (what Prometheus and
// Kubernetes probes send), localhost, a request without Host and admin.allowed_hosts are answered.
func TestAdminHost_OnlyAddressesLocalhostAndAllowedNamesAreAnswered(t *testing.T) {
	in := start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key", allowed_hosts: ["edgeq-admin.shop.svc.cluster.local", "Metrics.Example."]}
origin: {url: %q}
log: {level: warn}
`, newOrigin(t).URL))
	port := in.admin[strings.LastIndexByte(in.admin, ':'):]
	send := func(t *testing.T, path, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", in.admin+path, nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer test-key")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	paths := []string{"/metrics", "/healthz", "/readyz", "/api/queues", "/dashboard"}
	for _, host := range []string{"evil.example", "evil.example" + port, "EVIL.example.", "localhost.evil.example",
		"127.0.0.1.evil.example", "edgeq-admin.shop.svc"} {
		for _, path := range paths {
			if code, body := send(t, path, host); code != http.StatusMisdirectedRequest || !strings.Contains(body, `"MISDIRECTED_REQUEST"`) {
				t.Errorf("Host %q, %s: %d %.80s", host, path, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1" + port, "127.0.0.1", "10.1.2.3" + port, "[::1]" + port, "[::1]", "localhost",
		"localhost" + port, "LOCALHOST.", "edgeq-admin.shop.svc.cluster.local" + port, "EDGEQ-ADMIN.shop.svc.cluster.local.",
		"metrics.example"} {
		for _, path := range paths {
			if code, body := send(t, path, host); code != http.StatusOK {
				t.Errorf("Host %q, %s: %d %.80s", host, path, code, body)
			}
		}
	}
	// Every refusal is counted (6 hosts × 5 paths), read by address.
	if got := in.metric(t, "edgeq_admin_misdirected_total"); got != 30 {
		t.Errorf("edgeq_admin_misdirected_total %v, want 30", got)
	}
	// A Host that is not one (a malformed port, as a hostile or broken client sends it) is 400, as on the
	// public listener, whatever its name.
	for _, host := range []string{"edgeq-admin.shop.svc.cluster.local:abc", "127.0.0.1:9090:80", "127.0.0.1:123456",
		"[::1]:x"} {
		for _, path := range paths {
			if code, body := send(t, path, host); code != http.StatusBadRequest || !strings.Contains(body, `"INVALID_REQUEST"`) || !strings.Contains(body, `"host"`) {
				t.Errorf("Host %q, %s: %d %.80s", host, path, code, body)
			}
		}
	}
	// HTTP/1.0 without a Host (old health checkers).
	if got := statusLines(rawExchange(t, in.admin, "GET /healthz HTTP/1.0\r\n\r\n")); len(got) != 1 || got[0] != "200" {
		t.Errorf("no Host: %v", got)
	}
}
