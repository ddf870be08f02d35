// Package botcheck is the bot check behind queues[].turnstile (a check at join) and routes[].turnstile
// (a check on a route): a registry of providers, the one configured (challenge.provider), the route
// step with its clearance cookie and challenge page (gate.go).
//
// A provider is one file and one Register call in its init, the way a caddy module is: its settings
// (a section of its own under challenge.<name>, decoded and checked by the config package), the fields
// its solution travels in, the snippet a page shows inside its form, and its verification. The waiting
// room, the gate and the pages know a Check, never a provider by name.
package botcheck

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/metrics"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/templates"
)

// Scope is what a check is for: a queue's join or a route. A solution is good for its scope only.
type Scope struct {
	Kind string // "queue" or "route"
	Name string // the queue's id or the route's name
}

// String is the scope as a provider binds it: "queue:drop", "route:checkout".
func (s Scope) String() string { return s.Kind + ":" + s.Name }

// Field is one value a solution travels in: a form (or JSON) field, and the header an API client may
// send it in instead ("" for none). Not an Edgeq-* name: edgeq strips those from clients' requests.
type Field struct {
	Name, Header string
}

// Solution is the values of a provider's fields that a request carried, by field name.
type Solution map[string]string

// Empty reports whether the request carried none of the fields.
func (s Solution) Empty() bool {
	for _, v := range s {
		if v != "" {
			return false
		}
	}
	return true
}

// Submission is one solution to verify, with what it must be bound to.
type Submission struct {
	Solution Solution
	Scope    Scope
	Request  *http.Request // Host, and the client address in its context (web.RequestFrom)
	// Action is the widget action of the page edgeq rendered, "" when the widget was the shop's own.
	Action string
	// Deferred: the caller writes a passing verdict's Claim itself, atomically with what it grants
	// (a join's place, in the same script call): the provider writes no single-use record of its own
	// then, when it has a Claim to hand over.
	Deferred bool
}

// Claim is the single-use record a passing verdict of a Deferred submission still needs: bit Bit of
// the series Series (a name unique to the issuer and the second; its bits number the solutions),
// kept until Expires. The caller sets it with its grant and reports the outcome with Check.Settle;
// a bit set already is a replay.
type Claim struct {
	Series  string
	Bit     int64
	Expires time.Time
}

// Verdict is the outcome of one check.
type Verdict struct {
	OK     bool
	Result string    // the verification counter's result label
	At     time.Time // when the check was passed (a clearance is counted from it)
	Detail []string  // for the log: a provider's error codes
	// Claim, on a passing verdict of a Deferred submission, is the single-use record still to write.
	Claim *Claim

	refusal *web.Error // set when the check could not be made (the store): not the visitor's fault
}

// Refusal is the answer to a check that did not pass: the refusal the provider set (503
// STORE_UNAVAILABLE when a single-use record could not be written and on_store_error is closed),
// else 403 INVALID_TURNSTILE_TOKEN.
func (v Verdict) Refusal() *web.Error {
	if v.refusal != nil {
		return v.refusal
	}
	return web.ErrInvalidTurnstile.Because(fmt.Errorf("check %s %v", v.Result, v.Detail))
}

// Failed is a Verdict that refuses with e (nil: 403 INVALID_TURNSTILE_TOKEN).
func Failed(result string, e *web.Error, detail ...string) Verdict {
	return Verdict{Result: result, refusal: e, Detail: detail}
}

// Passed is a passing Verdict at time at.
func Passed(result string, at time.Time) Verdict { return Verdict{OK: true, Result: result, At: at} }

// Page is what a provider gets to draw its widget.
type Page struct {
	Request *http.Request
	Text    templates.Text
	Scope   Scope
	Action  string
}

// Widget is what a page shows inside its form for the visitor to pass the check: the snippet (with
// its own text for pages without JavaScript), the script it needs, and the Content-Security-Policy
// of a page that shows it.
type Widget struct {
	Snippet template.HTML
	Script  string // the script's URL, "" for none
	CSP     string
}

// Provider is one kind of bot check.
type Provider interface {
	// Fields are the fields (and headers) a solution travels in.
	Fields() []Field
	// Widget is what a page shows for the check of p.Scope.
	Widget(p Page) Widget
	// Verify checks one solution; it never returns a passing Verdict for an empty Solution.
	Verify(ctx context.Context, s Submission) Verdict
	// Results are the values of its counter's result label, created at zero at start.
	Results() []string
}

// Handlers is implemented by a provider that serves endpoints of its own (under server.prefix).
type Handlers interface {
	Register(mux *http.ServeMux)
}

// Env is what a provider is built from.
type Env struct {
	Config   *config.Config
	Settings config.ChallengeSettings // its own section (challenge.<name>); nil for none
	Store    *store.Store
	// Key is a MAC key of the provider's own, derived from edgeq's secrets.
	Key    []byte
	Prefix string
	// Static is the URL of one of edgeq's static files.
	Static func(name string) string
	// JoinRate is a queue's recent joins per second, as the waiting room sees them.
	JoinRate  func(queue string) float64
	Responder *web.Responder
	Now       func() time.Time // nil: time.Now
}

func (e Env) now() func() time.Time {
	if e.Now != nil {
		return e.Now
	}
	return time.Now
}

// render executes a provider's snippet template.
func render(t *template.Template, data any) template.HTML {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		// Only reachable with a snippet that does not fit its data: a bug in the provider.
		panic(fmt.Sprintf("botcheck: snippet %s: %v", t.Name(), err))
	}
	return template.HTML(b.String()) //nolint:gosec // the output of an html/template, escaped as it was executed
}

// Registration adds a provider: its name (the value of challenge.provider, the counter's provider
// label), its settings' defaults (nil when it has none) and its constructor.
type Registration struct {
	Name     string
	Settings func() config.ChallengeSettings
	New      func(Env) (Provider, error)
}

var (
	mu        sync.RWMutex
	providers = map[string]Registration{}
)

// Register adds a provider; called from its file's init.
func Register(r Registration) {
	config.RegisterChallenge(r.Name, r.Settings)
	mu.Lock()
	defer mu.Unlock()
	providers[r.Name] = r
}

// Names lists the registered providers, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(providers))
	for name := range providers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Check is the configured provider, counted.
type Check struct {
	name     string
	p        Provider
	fields   []Field
	verified *prometheus.CounterVec
}

// New builds the provider env.Config names; nil (and no error) when the provider is not configured
// (turnstile or hcaptcha without keys), so that queues and routes asking for a check are refused.
// The counter edgeq_challenge_verifications_total is registered on reg (nil: not registered).
func New(env Env, reg prometheus.Registerer) (*Check, error) {
	name := env.Config.Challenge.Provider
	mu.RLock()
	r, ok := providers[name]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("challenge.provider: %q is not a registered bot-check provider (%v)", name, Names())
	}
	env.Settings = env.Config.Challenge.Settings[name]
	p, err := r.New(env)
	if err != nil {
		return nil, fmt.Errorf("challenge provider %s: %w", name, err)
	}
	if p == nil {
		return nil, nil
	}
	c := &Check{name: name, p: p, fields: p.Fields(), verified: metrics.NewCounterVec("challenge_verifications_total",
		"Bot checks (joins, the challenge page, checked routes) by provider and result.", "provider", "result")}
	for _, result := range p.Results() {
		c.verified.WithLabelValues(name, result)
	}
	if reg != nil {
		if err := reg.Register(c.verified); err != nil {
			return nil, err
		}
		if extra, ok := p.(prometheus.Collector); ok {
			if err := reg.Register(extra); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// Name is the provider's name.
func (c *Check) Name() string { return c.name }

// Counter is the verification counter, for tests.
func (c *Check) Counter() *prometheus.CounterVec { return c.verified }

// Fields are the provider's solution fields.
func (c *Check) Fields() []Field { return c.fields }

// FieldNames are the fields' names, for reading a body.
func (c *Check) FieldNames() []string {
	names := make([]string, len(c.fields))
	for i, f := range c.fields {
		names[i] = f.Name
	}
	return names
}

// Pick takes the provider's fields out of values read from a body (FieldNames), and the headers for
// fields still empty.
func (c *Check) Pick(values map[string]string, h http.Header) Solution {
	s := make(Solution, len(c.fields))
	for _, f := range c.fields {
		v := values[f.Name]
		if v == "" && f.Header != "" && h != nil {
			v = h.Get(f.Header)
		}
		s[f.Name] = v
	}
	return s
}

// ReadBody reads the provider's fields from a JSON or form body (the body stays readable), and the
// headers for fields it lacks.
func (c *Check) ReadBody(r *http.Request, limit int64) (Solution, *web.Error) {
	f := fields.New(r, limit)
	values := make(map[string]string, len(c.fields))
	for _, field := range c.fields {
		v, _, e := f.Body(field.Name)
		if e != nil {
			return nil, e
		}
		values[field.Name] = v
	}
	return c.Pick(values, r.Header), nil
}

// HasField reports whether name is one of the provider's fields.
func (c *Check) HasField(name string) bool {
	return slices.ContainsFunc(c.fields, func(f Field) bool { return f.Name == name })
}

// Widget is the provider's widget for a page.
func (c *Check) Widget(p Page) Widget { return c.p.Widget(p) }

// Verify checks a solution and counts the result; a verdict with a Claim is counted by Settle.
func (c *Check) Verify(ctx context.Context, s Submission) Verdict {
	v := c.p.Verify(ctx, s)
	if v.Claim == nil {
		c.verified.WithLabelValues(c.name, v.Result).Inc()
	}
	return v
}

// Settle ends a verdict with a Claim: claimed is whether the caller's single-use record was the
// first. Without it the verdict becomes a replay, refused.
func (c *Check) Settle(v Verdict, claimed bool) Verdict {
	v.Claim = nil
	if !claimed {
		v = Failed(ResultReplayed, nil)
	}
	c.verified.WithLabelValues(c.name, v.Result).Inc()
	return v
}

// Register adds the provider's own endpoints to mux, if it has any.
func (c *Check) Register(mux *http.ServeMux) {
	if h, ok := c.p.(Handlers); ok {
		h.Register(mux)
	}
}

// Run runs the provider's background work (grouping its store writes) until ctx ends, if it has any.
func (c *Check) Run(ctx context.Context) {
	if r, ok := c.p.(interface{ Run(context.Context) }); ok {
		r.Run(ctx)
	}
}

// Provider is the provider itself, for tests.
func (c *Check) Provider() Provider { return c.p }
