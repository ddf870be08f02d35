// Package turnstile checks Cloudflare Turnstile responses with the siteverify API, as Cloudflare
// documents it (developers.cloudflare.com/turnstile/get-started/server-side-validation): a form POST of
// secret, response, remoteip and idempotency_key; one retry on internal-error with the same
// idempotency key; success, hostname and action checked; every response accepted at most once.
package turnstile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
)

// Results, the values of edgeq_turnstile_verifications_total{result}.
const (
	ResultSuccess           = "success"
	ResultMissing           = "missing"           // no response at all
	ResultInvalid           = "invalid"           // siteverify said no (bad, expired or spent token)
	ResultReplayed          = "replayed"          // this edgeq deployment has seen the response before
	ResultHostname          = "hostname"          // solved for another host
	ResultAction            = "action"            // solved for another widget
	ResultUnavailableOpen   = "error_open"        // siteverify unreachable, let through (on_error: open)
	ResultUnavailableClosed = "error_closed"      // siteverify unreachable, refused (on_error: closed)
	ResultStoreUnavailable  = "store_unavailable" // the single-use check could not use the store (closed)
)

// maxResponseLen is Cloudflare's documented limit on response tokens.
const maxResponseLen = 2048

// responseLifetime is how long Cloudflare keeps a response valid; edgeq remembers used responses that long.
const responseLifetime = 300 * time.Second

// Verdict is the outcome of one check.
type Verdict struct {
	OK     bool
	Result string    // one of the Result constants
	At     time.Time // when the challenge was solved (challenge_ts), or now
	Codes  []string  // siteverify error codes, for the log

	refusal *web.Error // set for ResultStoreUnavailable
}

// Refusal is the answer to a check that did not pass: 503 STORE_UNAVAILABLE when the single-use
// check could not use the store (on_store_error: closed), else 403 INVALID_TURNSTILE_TOKEN.
func (v Verdict) Refusal() *web.Error {
	if v.refusal != nil {
		return v.refusal
	}
	return web.ErrInvalidTurnstile.Because(fmt.Errorf("turnstile %s %v", v.Result, v.Codes))
}

// Client verifies responses.
type Client struct {
	cfg      config.Turnstile
	http     *http.Client
	store    *store.Store // remembers used responses; nil disables the local single-use check
	verified *prometheus.CounterVec
	now      func() time.Time
}

// New builds a client for cfg. Its counter is registered on reg.
func New(cfg config.Turnstile, st *store.Store, reg prometheus.Registerer) *Client {
	c := &Client{
		cfg:   cfg,
		store: st,
		// The overall timeout includes the retry's own budget: turnstile.timeout per attempt.
		http: &http.Client{Timeout: cfg.Timeout},
		verified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgeq", Name: "turnstile_verifications_total",
			Help: "Turnstile checks by result: success, missing, invalid, replayed, hostname, action, error_open, error_closed, store_unavailable.",
		}, []string{"result"}),
		now: time.Now,
	}
	for _, r := range []string{ResultSuccess, ResultMissing, ResultInvalid, ResultReplayed, ResultHostname,
		ResultAction, ResultUnavailableOpen, ResultUnavailableClosed, ResultStoreUnavailable} {
		c.verified.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(c.verified)
	}
	return c
}

// Counter is edgeq_turnstile_verifications_total, for tests.
func (c *Client) Counter() *prometheus.CounterVec { return c.verified }

// SiteKey is the public key pages render the widget with.
func (c *Client) SiteKey() string { return c.cfg.SiteKey }

// ScriptURL is where the widget script is loaded from.
func (c *Client) ScriptURL() string { return c.cfg.ScriptURL }

// IsTestingSecret reports whether the secret is one of Cloudflare's dummy testing secrets, which must
// never protect production traffic.
func IsTestingSecret(secret string) bool {
	return len(secret) > 2 && (secret[0] >= '1' && secret[0] <= '3') && secret[1] == 'x' &&
		strings.HasPrefix(secret[2:], "0000000000")
}

// Check is what is being verified: the response token, the visitor's IP and the Host it asked for, and
// the widget action edgeq rendered ("" when the widget was the shop's own, whose action is unknown).
type Check struct {
	Response string
	RemoteIP string
	Host     string
	Action   string
}

// siteverifyAnswer is the documented siteverify response.
type siteverifyAnswer struct {
	Success     bool     `json:"success"`
	ErrorCodes  []string `json:"error-codes"`
	ChallengeTS string   `json:"challenge_ts"`
	Hostname    string   `json:"hostname"`
	Action      string   `json:"action"`
	Metadata    struct {
		ResultWithTestingKey bool `json:"result_with_testing_key"`
	} `json:"metadata"`
}

// Verify checks one response. An error is returned only for a bug-like failure of edgeq itself; an
// unreachable siteverify is a Verdict decided by turnstile.on_error.
func (c *Client) Verify(ctx context.Context, chk Check) Verdict {
	v := c.verify(ctx, chk)
	c.verified.WithLabelValues(v.Result).Inc()
	return v
}

func (c *Client) verify(ctx context.Context, chk Check) Verdict {
	if chk.Response == "" {
		return Verdict{Result: ResultMissing}
	}
	if len(chk.Response) > maxResponseLen {
		return Verdict{Result: ResultInvalid, Codes: []string{"invalid-input-response"}}
	}
	// Cloudflare accepts a response once; edgeq makes sure of it too, across replicas, so that a
	// response can never be spent twice even while on_error lets checks through. Without the store
	// the request's on_store_error decides: closed refuses, open checks without this guard.
	if fresh, err := c.markUsed(ctx, chk.Response); err != nil {
		if e := web.RequestFrom(ctx).StoreFailed(config.RequireTurnstile, err); e != nil {
			return Verdict{Result: ResultStoreUnavailable, refusal: e}
		}
	} else if !fresh {
		return Verdict{Result: ResultReplayed}
	}
	idempotency := newIdempotencyKey()
	var answer siteverifyAnswer
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		answer, err = c.siteverify(ctx, chk, idempotency)
		if err != nil || answer.Success || !slices.Contains(answer.ErrorCodes, "internal-error") {
			break
		}
	}
	if err != nil || (!answer.Success && slices.Contains(answer.ErrorCodes, "internal-error")) {
		if c.cfg.OnError == "open" {
			return Verdict{OK: true, Result: ResultUnavailableOpen, At: c.now(), Codes: answer.ErrorCodes}
		}
		return Verdict{Result: ResultUnavailableClosed, Codes: answer.ErrorCodes}
	}
	if !answer.Success {
		return Verdict{Result: ResultInvalid, Codes: answer.ErrorCodes}
	}
	// Testing keys answer for a fixed hostname; they are refused outside testing by a warning at start.
	if !answer.Metadata.ResultWithTestingKey && !c.hostnameAllowed(answer.Hostname, chk.Host) {
		return Verdict{Result: ResultHostname, Codes: []string{"hostname " + answer.Hostname}}
	}
	if chk.Action != "" && answer.Action != chk.Action && !answer.Metadata.ResultWithTestingKey {
		return Verdict{Result: ResultAction, Codes: []string{"action " + answer.Action}}
	}
	at := c.now()
	if ts, err := time.Parse(time.RFC3339, answer.ChallengeTS); err == nil && ts.Before(at) {
		at = ts
	}
	return Verdict{OK: true, Result: ResultSuccess, At: at}
}

func (c *Client) siteverify(ctx context.Context, chk Check, idempotency string) (siteverifyAnswer, error) {
	form := url.Values{"secret": {c.cfg.SecretKey}, "response": {chk.Response}, "idempotency_key": {idempotency}}
	if chk.RemoteIP != "" {
		form.Set("remoteip", chk.RemoteIP)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.VerifyURL, strings.NewReader(form.Encode()))
	if err != nil {
		return siteverifyAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.http.Do(req)
	if err != nil {
		return siteverifyAnswer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return siteverifyAnswer{}, fmt.Errorf("siteverify answered %d", resp.StatusCode)
	}
	var answer siteverifyAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&answer); err != nil {
		return siteverifyAnswer{}, fmt.Errorf("siteverify answer: %w", err)
	}
	return answer, nil
}

// hostnameAllowed checks siteverify's hostname against turnstile.hostnames, or the request's Host.
func (c *Client) hostnameAllowed(got, requestHost string) bool {
	if len(c.cfg.Hostnames) > 0 {
		return slices.ContainsFunc(c.cfg.Hostnames, func(h string) bool { return strings.EqualFold(h, got) })
	}
	return got != "" && strings.EqualFold(web.HostName(requestHost), got)
}

// markUsed records a response as spent; fresh is false if it was spent before.
func (c *Client) markUsed(ctx context.Context, response string) (fresh bool, err error) {
	if c.store == nil {
		return true, nil
	}
	if web.RequestFrom(ctx).Store.Degraded {
		return false, web.ErrDegraded
	}
	ok, err := c.store.Client.SetNX(ctx, usedKey(c.store.Keys, response), 1, responseLifetime).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return ok, err
}

func newIdempotencyKey() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // UUID version 4, as Cloudflare's docs show
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
