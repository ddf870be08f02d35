package botcheck

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/pow"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
)

// A self-hosted proof of work (internal/pow): the page's worker finds a nonce for a challenge edgeq
// issued, bound to the scope and the visitor; checking it is one hash and one store write.
func init() {
	Register(Registration{
		Name:     "pow",
		Settings: func() config.ChallengeSettings { return &PowSettings{TTL: 2 * time.Minute} },
		New:      newPow,
	})
}

// DefaultPowDifficulty is the difficulty of challenge.pow.difficulty: 0 (docs/security.md "Proof of
// work: the cost of a place" has the measurements it is chosen from).
const DefaultPowDifficulty = 18

// PowSettings is challenge.pow.
type PowSettings struct {
	// Difficulty is the leading zero bits a solution's hash needs; 0 is DefaultPowDifficulty.
	Difficulty int         `yaml:"difficulty"`
	Adaptive   PowAdaptive `yaml:"adaptive"`
	// TTL is a challenge's life.
	TTL time.Duration `yaml:"ttl"`
}

// PowAdaptive raises a queue's join difficulty by a bit for each doubling of its join rate beyond
// JoinsPerSecond, up to MaxDifficulty; off while either is 0.
type PowAdaptive struct {
	MaxDifficulty  int     `yaml:"max_difficulty"`
	JoinsPerSecond float64 `yaml:"joins_per_second"`
}

// Problems checks the ranges.
func (s *PowSettings) Problems(bool) []Problem {
	var out []Problem
	add := func(path, format string, args ...any) {
		out = append(out, Problem{Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	if s.Difficulty < 0 || s.Difficulty > pow.MaxDifficulty {
		add("difficulty", "%d must be between 0 (the default, %d) and %d", s.Difficulty, DefaultPowDifficulty, pow.MaxDifficulty)
	}
	a := s.Adaptive
	if a.MaxDifficulty != 0 && (a.MaxDifficulty < s.floor() || a.MaxDifficulty > pow.MaxDifficulty) {
		add("adaptive.max_difficulty", "%d must be 0 (off) or between the difficulty (%d) and %d", a.MaxDifficulty, s.floor(), pow.MaxDifficulty)
	}
	if a.JoinsPerSecond < 0 {
		add("adaptive.joins_per_second", "%g must be 0 (off) or more", a.JoinsPerSecond)
	}
	if (a.MaxDifficulty == 0) != (a.JoinsPerSecond == 0) {
		add("adaptive", "max_difficulty and joins_per_second are set together (both 0 is off)")
	}
	if s.TTL < 10*time.Second || s.TTL > 30*time.Minute {
		add("ttl", "%s must be between 10s and 30m", s.TTL)
	}
	return out
}

// Problem is config.Problem, for providers' settings.
type Problem = config.Problem

func (s *PowSettings) floor() int {
	if s.Difficulty == 0 {
		return DefaultPowDifficulty
	}
	return s.Difficulty
}

type powProvider struct {
	checker   *pow.Checker
	adaptive  pow.Adaptive
	ttl       time.Duration
	prefix    string
	script    string
	worker    string
	joinRate  func(queue string) float64
	responder *web.Responder
}

func newPow(env Env) (Provider, error) {
	s := env.Settings.(*PowSettings)
	if len(env.Key) < 32 {
		return nil, errors.New("proof of work needs a key of 32 bytes or more")
	}
	joinRate := env.JoinRate
	if joinRate == nil {
		joinRate = func(string) float64 { return 0 }
	}
	static := env.Static
	if static == nil {
		static = func(name string) string { return env.Prefix + "/static/" + name }
	}
	return &powProvider{
		checker:  pow.New(env.Key, env.Store),
		adaptive: pow.Adaptive{Floor: s.floor(), Ceiling: s.Adaptive.MaxDifficulty, JoinsPerSecond: s.Adaptive.JoinsPerSecond},
		ttl:      s.TTL, prefix: env.Prefix, script: static("pow.js"), worker: static("pow-worker.js"),
		joinRate: joinRate, responder: env.Responder,
	}, nil
}

// Solution fields (and the headers an API client may send them in).
const (
	powChallengeField = "pow_challenge"
	powNonceField     = "pow_nonce"
)

func (p *powProvider) Fields() []Field {
	return []Field{{Name: powChallengeField, Header: "Pow-Challenge"}, {Name: powNonceField, Header: "Pow-Nonce"}}
}

func (p *powProvider) Results() []string {
	return []string{pow.ResultSuccess, pow.ResultMissing, pow.ResultInvalid, pow.ResultExpired, pow.ResultInsufficient,
		pow.ResultReplayed, pow.ResultStoreError, ResultStoreUnavailable}
}

// powBinding is what a challenge is bound to besides its scope: the host and the visitor's network
// (as a clearance is: an address moves within its network during a visit).
func powBinding(r *http.Request) string {
	return vocab.HostName(r.Host) + "\x00" + clearanceNetwork(web.RequestFrom(r.Context()).ClientIP)
}

func (p *powProvider) Verify(ctx context.Context, s Submission) Verdict {
	if s.Deferred {
		// The caller writes the single-use record with its grant: one script call for both.
		result, rec := p.checker.Check(s.Solution[powChallengeField], s.Solution[powNonceField], s.Scope.String(), powBinding(s.Request))
		if result != pow.ResultSuccess {
			return Failed(result, nil)
		}
		v := Passed(result, time.Now())
		v.Claim = &Claim{Series: rec.Series, Bit: rec.Bit, Expires: rec.Expires}
		return v
	}
	if web.RequestFrom(ctx).Store.Degraded {
		if e := web.RequestFrom(ctx).StoreFailed(config.RequireTurnstile, web.ErrDegraded); e != nil {
			return Failed(ResultStoreUnavailable, e)
		}
	}
	result, err := p.checker.Verify(ctx, s.Solution[powChallengeField], s.Solution[powNonceField], s.Scope.String(), powBinding(s.Request))
	if err != nil {
		// The store did not take the spent challenge: on_store_error decides (open lets the solved
		// challenge through without its single-use record).
		if e := web.RequestFrom(ctx).StoreFailed(config.RequireTurnstile, err); e != nil {
			return Failed(ResultStoreUnavailable, e)
		}
		return Passed(pow.ResultStoreError, time.Now())
	}
	if result != pow.ResultSuccess {
		return Failed(result, nil)
	}
	return Passed(result, time.Now())
}

// Run groups the single-use writes of concurrent checks until ctx ends.
func (p *powProvider) Run(ctx context.Context) { p.checker.Run(ctx) }

// difficulty is the difficulty of a scope's next challenge: adaptive for a queue's join.
func (p *powProvider) difficulty(scope Scope) int {
	if scope.Kind == "queue" {
		return p.adaptive.Difficulty(p.joinRate(scope.Name))
	}
	return p.adaptive.Floor
}

// Register serves GET {prefix}/pow_challenge?queue_id=ID (a join) or ?route=NAME (a checked route;
// "*" for the challenge page, whose clearance is good for every checked route).
func (p *powProvider) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+p.prefix+"/pow_challenge", p.issue)
}

func (p *powProvider) issue(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var scope Scope
	switch queue, route := q.Get("queue_id"), q.Get("route"); {
	case queue != "" && route == "" && config.ID.MatchString(queue):
		scope = Scope{Kind: "queue", Name: queue}
	case route != "" && queue == "" && (route == challengeScope.Name || config.ID.MatchString(route)):
		scope = Scope{Kind: "route", Name: route}
	default:
		p.responder.Error(w, r, web.ErrInvalidRequest.With("field", "queue_id").
			Because(errors.New("pow_challenge takes one of queue_id (a queue's id) and route (a route's name, or *)")))
		return
	}
	c := p.checker.Issue(scope.String(), powBinding(r), p.difficulty(scope), p.ttl)
	web.WriteJSON(w, http.StatusOK, map[string]any{
		"challenge": c.Value, "difficulty": c.Difficulty, "expires_in": int64(p.ttl / time.Second),
	})
}

var powSnippet = template.Must(template.New("pow").Parse(
	`<div class="pow" data-pow-url="{{.URL}}" data-pow-worker="{{.Worker}}" data-pow-done="{{.Done}}" data-pow-failed="{{.Failed}}">
    <input type="hidden" name="pow_challenge" value="">
    <input type="hidden" name="pow_nonce" value="">
    <p class="pow-status" role="status" aria-live="polite">{{.Working}}</p>
    <progress class="pow-progress" max="100" value="0" aria-label="{{.Label}}"></progress>
  </div>
  <noscript><p class="notice">{{.NeedsJS}}</p></noscript>`))

func (p *powProvider) Widget(pg Page) Widget {
	param := url.Values{}
	if pg.Scope.Kind == "queue" {
		param.Set("queue_id", pg.Scope.Name)
	} else {
		param.Set("route", pg.Scope.Name)
	}
	t := pg.Text
	return Widget{
		Snippet: render(powSnippet, map[string]string{
			"URL": p.prefix + "/pow_challenge?" + param.Encode(), "Worker": p.worker,
			"Working": t.T("pow.working"), "Done": t.T("pow.done"), "Failed": t.T("pow.failed"),
			"Label": t.T("pow.progress"), "NeedsJS": t.T("pow.needs_js"),
		}),
		Script: p.script, CSP: web.DefaultCSP,
	}
}
