package botcheck

// The siteverify protocol that Cloudflare Turnstile (developers.cloudflare.com/turnstile/get-started/
// server-side-validation) and hCaptcha (docs.hcaptcha.com, "Verify the User Response Server Side")
// share: a form POST of secret, response and remoteip (hCaptcha also takes sitekey, Turnstile an
// idempotency_key); one retry on internal-error; success, hostname and action checked; every response
// accepted at most once by this deployment (a SET NX in the store).

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

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// Results of a siteverify check, the values of the verification counter's result label.
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

var siteverifyResults = []string{ResultSuccess, ResultMissing, ResultInvalid, ResultReplayed, ResultHostname,
	ResultAction, ResultUnavailableOpen, ResultUnavailableClosed, ResultStoreUnavailable}

// maxResponseLen bounds a response token (Cloudflare documents 2048 characters).
const maxResponseLen = 2048

// responseLifetime is how long a response stays valid at either service; edgeq remembers used
// responses that long.
const responseLifetime = 300 * time.Second

// siteverify is a client of one service's siteverify endpoint.
type siteverify struct {
	name      string // the provider: the single-use records' namespace
	verifyURL string
	secret    string
	siteKey   string // sent as sitekey when set (hCaptcha)
	// idempotency sends an idempotency_key, the same on the retry (Turnstile).
	idempotency bool
	// testing: the service's documented testing keys, whose answers name no real hostname or action.
	testing   func(answer siteverifyAnswer) bool
	hostnames []string
	onError   string
	http      *http.Client
	store     *store.Store // nil: no single-use record
	now       func() time.Time
}

// check is one response to verify: the token, the visitor's address and the Host it asked for, and
// the widget action edgeq rendered ("" when the widget was the shop's own, whose action is unknown).
type check struct {
	Response string
	RemoteIP string
	Host     string
	Action   string
}

// siteverifyAnswer is the documented answer (both services).
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

// verify checks one response. An unreachable siteverify is decided by on_error.
func (c *siteverify) verify(ctx context.Context, chk check) Verdict {
	if chk.Response == "" {
		return Failed(ResultMissing, nil)
	}
	if len(chk.Response) > maxResponseLen {
		return Failed(ResultInvalid, nil, "invalid-input-response")
	}
	// The service accepts a response once; edgeq makes sure of it too, across replicas, so that a
	// response can never be spent twice even while on_error lets checks through. Without the store
	// the request's on_store_error decides: closed refuses, open checks without this guard.
	if fresh, err := c.markUsed(ctx, chk.Response); err != nil {
		if e := web.RequestFrom(ctx).StoreFailed(config.RequireTurnstile, err); e != nil {
			return Failed(ResultStoreUnavailable, e)
		}
	} else if !fresh {
		return Failed(ResultReplayed, nil)
	}
	idempotency := ""
	if c.idempotency {
		idempotency = newIdempotencyKey()
	}
	var answer siteverifyAnswer
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		answer, err = c.call(ctx, chk, idempotency)
		if err != nil || answer.Success || !slices.Contains(answer.ErrorCodes, "internal-error") {
			break
		}
	}
	if err != nil || (!answer.Success && slices.Contains(answer.ErrorCodes, "internal-error")) {
		if c.onError == "open" {
			return Verdict{OK: true, Result: ResultUnavailableOpen, At: c.now(), Detail: answer.ErrorCodes}
		}
		return Failed(ResultUnavailableClosed, nil, answer.ErrorCodes...)
	}
	if !answer.Success {
		return Failed(ResultInvalid, nil, answer.ErrorCodes...)
	}
	// Testing keys answer for a fixed hostname; they are refused outside testing by a warning at start.
	testing := c.testing != nil && c.testing(answer)
	if !testing && !c.hostnameAllowed(answer.Hostname, chk.Host) {
		return Failed(ResultHostname, nil, "hostname "+answer.Hostname)
	}
	if chk.Action != "" && answer.Action != chk.Action && !testing {
		return Failed(ResultAction, nil, "action "+answer.Action)
	}
	at := c.now()
	if ts, err := time.Parse(time.RFC3339, answer.ChallengeTS); err == nil && ts.Before(at) {
		at = ts
	}
	return Passed(ResultSuccess, at)
}

func (c *siteverify) call(ctx context.Context, chk check, idempotency string) (siteverifyAnswer, error) {
	form := url.Values{"secret": {c.secret}, "response": {chk.Response}}
	if idempotency != "" {
		form.Set("idempotency_key", idempotency)
	}
	if c.siteKey != "" {
		form.Set("sitekey", c.siteKey)
	}
	if chk.RemoteIP != "" {
		form.Set("remoteip", chk.RemoteIP)
	}
	//nolint:gosec // the provider's siteverify URL from the configuration, never from the request
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.verifyURL, strings.NewReader(form.Encode()))
	if err != nil {
		return siteverifyAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	//nolint:gosec // the provider's siteverify URL from the configuration, never from the request
	resp, err := c.http.Do(req)
	if err != nil {
		return siteverifyAnswer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return siteverifyAnswer{}, fmt.Errorf("siteverify answered %d", resp.StatusCode)
	}
	var answer siteverifyAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&answer); err != nil {
		return siteverifyAnswer{}, fmt.Errorf("siteverify answer: %w", err)
	}
	return answer, nil
}

// hostnameAllowed checks siteverify's hostname against the configured hostnames, or the request's Host.
func (c *siteverify) hostnameAllowed(got, requestHost string) bool {
	if len(c.hostnames) > 0 {
		return slices.ContainsFunc(c.hostnames, func(h string) bool { return strings.EqualFold(h, got) })
	}
	return got != "" && strings.EqualFold(vocab.HostName(requestHost), got)
}

// markUsed records a response as spent; fresh is false if it was spent before.
func (c *siteverify) markUsed(ctx context.Context, response string) (fresh bool, err error) {
	if c.store == nil {
		return true, nil
	}
	if web.RequestFrom(ctx).Store.Degraded {
		return false, web.ErrDegraded
	}
	ok, err := c.store.Client.SetNX(ctx, usedKey(c.store.Keys, c.name, response), 1, responseLifetime).Result()
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

// remoteIP is the visitor's address as siteverify takes it, "" when unknown.
func remoteIP(r *http.Request) string {
	if a := web.RequestFrom(r.Context()).ClientIP; a.IsValid() {
		return a.String()
	}
	return ""
}
