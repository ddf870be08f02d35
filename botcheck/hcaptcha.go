package botcheck

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/config"
)

// hCaptcha: the siteverify protocol with a sitekey (docs.hcaptcha.com).
func init() {
	Register(Registration{
		Name: "hcaptcha",
		Settings: func() config.ChallengeSettings {
			return &HCaptchaSettings{
				VerifyURL: "https://api.hcaptcha.com/siteverify", ScriptURL: "https://js.hcaptcha.com/1/api.js",
				Timeout: 5 * time.Second, OnError: "closed",
			}
		},
		New: newHCaptcha,
	})
}

// hCaptcha's documented test keys (docs.hcaptcha.com/#integration-testing-test-keys): every response
// passes for them, so they must never protect production traffic.
const (
	HCaptchaTestSiteKey = "10000000-ffff-ffff-ffff-000000000001"
	HCaptchaTestSecret  = "0x0000000000000000000000000000000000000000"
)

// HCaptchaSettings is challenge.hcaptcha.
type HCaptchaSettings struct {
	SiteKey   string        `yaml:"site_key"`
	Secret    string        `yaml:"secret" secret:"true"`
	VerifyURL string        `yaml:"verify_url"`
	ScriptURL string        `yaml:"script_url"`
	Timeout   time.Duration `yaml:"timeout"`
	// Hostnames are the accepted hostname of siteverify's answers; none: the request's Host.
	Hostnames []string `yaml:"hostnames"`
	OnError   string   `yaml:"on_error"`
}

// Problems checks the URLs and, when hCaptcha is in use, that the keys are set.
func (s *HCaptchaSettings) Problems(inUse bool) []Problem {
	var out []Problem
	add := func(path, format string, args ...any) {
		out = append(out, Problem{Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	for path, u := range map[string]string{"verify_url": s.VerifyURL, "script_url": s.ScriptURL} {
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			add(path, "%q must be an http or https URL", u)
		}
	}
	if s.Timeout < time.Millisecond {
		add("timeout", "%s must be at least 1ms", s.Timeout)
	}
	if s.OnError != "closed" && s.OnError != "open" {
		add("on_error", "%q must be closed or open", s.OnError)
	}
	if inUse && s.SiteKey == "" {
		add("site_key", "required because challenge.provider is hcaptcha and a queue or route asks for a check")
	}
	if inUse && s.Secret == "" {
		add("secret", "required because challenge.provider is hcaptcha and a queue or route asks for a check")
	}
	return out
}

type hcaptchaProvider struct {
	sv      *siteverify
	siteKey string
	script  string
}

func newHCaptcha(env Env) (Provider, error) {
	s := env.Settings.(*HCaptchaSettings)
	if s.SiteKey == "" || s.Secret == "" {
		return nil, nil // not configured: queues and routes asking for a check are refused
	}
	return &hcaptchaProvider{
		sv: &siteverify{
			name: "hcaptcha", verifyURL: s.VerifyURL, secret: s.Secret, siteKey: s.SiteKey,
			// The test keys' answers name no real hostname.
			testing:   func(siteverifyAnswer) bool { return s.Secret == HCaptchaTestSecret },
			hostnames: s.Hostnames, onError: s.OnError, store: env.Store, now: env.now(),
			http: &http.Client{Timeout: s.Timeout},
		},
		siteKey: s.SiteKey, script: s.ScriptURL,
	}, nil
}

func (p *hcaptchaProvider) Fields() []Field {
	return []Field{{Name: "h-captcha-response", Header: "H-Captcha-Response"}}
}

func (p *hcaptchaProvider) Results() []string { return siteverifyResults }

var hcaptchaSnippet = template.Must(template.New("hcaptcha").Parse(
	`<div class="h-captcha" data-sitekey="{{.Key}}"></div>
  <noscript><p class="notice">{{.NeedsJS}}</p></noscript>`))

func (p *hcaptchaProvider) Widget(pg Page) Widget {
	return Widget{
		Snippet: render(hcaptchaSnippet, map[string]string{"Key": p.siteKey, "NeedsJS": pg.Text.T("wait.needs_js")}),
		Script:  p.script, CSP: hcaptchaCSP(p.script),
	}
}

// hcaptchaSources are what hCaptcha's documentation asks a page with its widget to allow for scripts,
// frames, styles and requests (docs.hcaptcha.com, "Content Security Policy").
const hcaptchaSources = "https://hcaptcha.com https://*.hcaptcha.com"

// hcaptchaCSP is the policy of a page with the widget: hCaptcha's sources when script_url is
// hCaptcha's own, else (a stand-in, a proxy of the script) script_url's origin in their place.
func hcaptchaCSP(scriptURL string) string {
	sources := scriptOrigin(scriptURL)
	if u, err := url.Parse(sources); err == nil && u.Scheme == "https" {
		if host := strings.ToLower(u.Hostname()); host == "hcaptcha.com" || strings.HasSuffix(host, ".hcaptcha.com") {
			sources = hcaptchaSources
		}
	}
	return widgetCSP(sources, sources)
}

// Verify checks the response; hCaptcha has no widget action, so none is checked.
func (p *hcaptchaProvider) Verify(ctx context.Context, s Submission) Verdict {
	return p.sv.verify(ctx, check{Response: s.Solution["h-captcha-response"], RemoteIP: remoteIP(s.Request), Host: s.Request.Host})
}
