package botcheck

import (
	"context"
	"html/template"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/metrics"
)

// Cloudflare Turnstile: its settings are the top-level turnstile: section (config.Turnstile).
func init() { Register(Registration{Name: "turnstile", New: newTurnstile}) }

type turnstileProvider struct {
	sv      *siteverify
	siteKey string
	script  string
	// counted is edgeq_turnstile_verifications_total{result}, kept beside the providers' counter for
	// the dashboards and alerts that read it.
	counted *prometheus.CounterVec
}

func newTurnstile(env Env) (Provider, error) {
	cfg := env.Config.Turnstile
	if cfg.SiteKey == "" || cfg.SecretKey == "" {
		return nil, nil // not configured: queues and routes asking for a check are refused
	}
	p := &turnstileProvider{
		sv: &siteverify{
			name: "turnstile", verifyURL: cfg.VerifyURL, secret: cfg.SecretKey, idempotency: true,
			testing:   func(a siteverifyAnswer) bool { return a.Metadata.ResultWithTestingKey },
			hostnames: cfg.Hostnames, onError: cfg.OnError, store: env.Store, now: env.now(),
			// The overall timeout includes the retry's own budget: turnstile.timeout per attempt.
			http: &http.Client{Timeout: cfg.Timeout},
		},
		siteKey: cfg.SiteKey, script: cfg.ScriptURL,
		counted: metrics.NewCounterVec("turnstile_verifications_total",
			"Turnstile checks by result: success, missing, invalid, replayed, hostname, action, error_open, error_closed, store_unavailable.", "result"),
	}
	for _, r := range siteverifyResults {
		p.counted.WithLabelValues(r)
	}
	return p, nil
}

func (p *turnstileProvider) Fields() []Field {
	return []Field{{Name: "cf-turnstile-response", Header: "CF-Turnstile-Response"}, {Name: "turnstile_token"}}
}

func (p *turnstileProvider) Results() []string { return siteverifyResults }

var turnstileSnippet = template.Must(template.New("turnstile").Parse(
	`<div class="cf-turnstile" data-sitekey="{{.Key}}" data-action="{{.Action}}"></div>
  <noscript><p class="notice">{{.NeedsJS}}</p></noscript>`))

func (p *turnstileProvider) Widget(pg Page) Widget {
	return Widget{
		Snippet: render(turnstileSnippet, map[string]string{"Key": p.siteKey, "Action": pg.Action, "NeedsJS": pg.Text.T("wait.needs_js")}),
		Script:  p.script, CSP: PageCSP(p.script),
	}
}

func (p *turnstileProvider) Verify(ctx context.Context, s Submission) Verdict {
	response := s.Solution["cf-turnstile-response"]
	if response == "" {
		response = s.Solution["turnstile_token"]
	}
	v := p.sv.verify(ctx, check{Response: response, RemoteIP: remoteIP(s.Request), Host: s.Request.Host, Action: s.Action})
	p.counted.WithLabelValues(v.Result).Inc()
	return v
}

func (p *turnstileProvider) Describe(ch chan<- *prometheus.Desc) { p.counted.Describe(ch) }
func (p *turnstileProvider) Collect(ch chan<- prometheus.Metric) { p.counted.Collect(ch) }

// IsTestingSecret reports whether secret is one of Cloudflare's dummy testing secrets, which must
// never protect production traffic.
func IsTestingSecret(secret string) bool {
	return len(secret) > 2 && (secret[0] >= '1' && secret[0] <= '3') && secret[1] == 'x' &&
		strings.HasPrefix(secret[2:], "0000000000")
}

// Counted is edgeq_turnstile_verifications_total, for tests.
func (p *turnstileProvider) Counted() *prometheus.CounterVec { return p.counted }
