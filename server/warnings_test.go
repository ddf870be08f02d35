package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// edgeq check (and start-up) warns about hCaptcha's test secret when hCaptcha is the provider, and
// about challenge.hcaptcha.hostnames being empty while a queue or route asks for a check, the way it
// does for Turnstile; Turnstile's hostnames warning is about Turnstile only.
func TestCheck_WarnsAboutHCaptchaTestSecretAndHostnames(t *testing.T) {
	const (
		testSecret = "challenge.hcaptcha.secret is hCaptcha's test secret"
		hostnames  = "challenge.hcaptcha.hostnames is empty"
		turnstile  = "turnstile.hostnames is empty"
		own        = `site_key: "e0e9e000-0000-4000-8000-00000000ed9e", secret: "0xed9e000000000000000000000000000000000001"`
		test       = `site_key: "10000000-ffff-ffff-ffff-000000000001", secret: "0x0000000000000000000000000000000000000000"`
		listed     = `, hostnames: ["shop.example"]`
		queue      = "queues: [{id: club, capacity: 1, turnstile: true}]\n"
		route      = `routes: [{name: account, match: "GET /account/", turnstile: true}]` + "\n"
	)
	for _, c := range []struct {
		name, provider, keys, hostnames, users string
		warns                                  []string
	}{
		{"test secret", "hcaptcha", test, listed, queue, []string{testSecret}},
		{"test secret, no hostnames", "hcaptcha", test, "", route, []string{testSecret, hostnames}},
		{"own keys, hostnames listed", "hcaptcha", own, listed, queue, nil},
		{"own keys, no hostnames, a queue", "hcaptcha", own, "", queue, []string{hostnames}},
		{"own keys, no hostnames, a route", "hcaptcha", own, "", route, []string{hostnames}},
		{"own keys, no hostnames, no check asked for", "hcaptcha", own, "", "", nil},
		{"test secret of a provider not in use", "turnstile", test, "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := fmt.Sprintf("origin: {url: \"http://127.0.0.1:1\"}\nchallenge: {provider: %s, hcaptcha: {%s%s}}\n%s",
				c.provider, c.keys, c.hostnames, c.users)
			path := filepath.Join(t.TempDir(), "edgeq.yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			problems, warnings, err := Check(path)
			if err != nil || len(problems) > 0 {
				t.Fatalf("Check: %v %v", err, problems)
			}
			all := strings.Join(warnings, "\n")
			for _, w := range []string{testSecret, hostnames, turnstile} {
				want := false
				for _, x := range c.warns {
					want = want || x == w
				}
				if strings.Contains(all, w) != want {
					t.Errorf("warned %q: %v, want %v:\n%s", w, !want, want, all)
				}
			}
			if strings.Contains(all, hostnames) && !strings.Contains(all, "(used by queue club)") && !strings.Contains(all, "(used by route account)") {
				t.Errorf("the hostnames warning does not name its users:\n%s", all)
			}
		})
	}
}
