// Package turnstiletest is a stand-in for Cloudflare Turnstile that behaves as Cloudflare documents, so
// tests and the demo work with no internet: the siteverify endpoint (with the documented dummy secret
// keys, single use, idempotency keys, hostname and action) and a widget script that renders a
// checkbox and fills in cf-turnstile-response. Serve it with net/http (cmd/turnstile-dev does).
package turnstiletest

import (
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/widgettoken"
)

// Cloudflare's dummy keys (developers.cloudflare.com/turnstile/troubleshooting/testing/).
const (
	DummySiteKeyPass        = "1x00000000000000000000AA" // always passes, visible
	DummySiteKeyBlock       = "2x00000000000000000000AB" // always blocks, visible
	DummySiteKeyInteractive = "3x00000000000000000000FF" // forces an interactive challenge
	DummySecretPass         = "1x0000000000000000000000000000000AA"
	DummySecretFail         = "2x0000000000000000000000000000000AA"
	DummySecretSpent        = "3x0000000000000000000000000000000AA" // "token already spent"
	DummyToken              = "XXXX.DUMMY.TOKEN.XXXX"               // what dummy site keys hand out
)

// The stand-in's own key pair: a widget with SiteKey hands out real tokens — signed, single use,
// bound to the page's hostname and the widget's action, valid 300 s — that only Secret verifies.
const (
	SiteKey = "0x4AAAAAAAedgeqTestSiteKey"
	Secret  = "0x4AAAAAAAedgeqTestSecretKey0000000"
)

//go:embed widget.js
var widgetJS []byte

const tokenLifetime = 300 * time.Second

// Server is the stand-in. Its fault knobs let tests make siteverify misbehave.
type Server struct {
	key []byte

	mu      sync.Mutex
	spent   map[string]bool        // tokens already verified
	answers map[string]verifyReply // by idempotency key: a retry gets the first answer

	// InternalErrors makes the next n siteverify calls answer internal-error.
	InternalErrors atomic.Int64
	// Delay holds every siteverify answer this long (to test timeouts).
	Delay atomic.Int64 // nanoseconds
	// Calls counts siteverify calls.
	Calls atomic.Int64
	now   func() time.Time
}

// New returns a stand-in with a fresh signing key.
func New() *Server {
	return &Server{key: widgettoken.NewKey(), spent: map[string]bool{}, answers: map[string]verifyReply{}, now: time.Now}
}

// ServeHTTP serves /turnstile/v0/api.js, /turnstile/v0/siteverify and /turnstile/v0/token.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/turnstile/v0/api.js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(widgetJS)
	case r.Method == http.MethodPost && r.URL.Path == "/turnstile/v0/siteverify":
		s.siteverify(w, r)
	case r.URL.Path == "/turnstile/v0/token":
		s.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

type verifyReply struct {
	Success     bool           `json:"success"`
	ErrorCodes  []string       `json:"error-codes"`
	ChallengeTS string         `json:"challenge_ts,omitempty"`
	Hostname    string         `json:"hostname,omitempty"`
	Action      string         `json:"action"`
	CData       string         `json:"cdata"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

func fail(codes ...string) verifyReply { return verifyReply{ErrorCodes: codes} }

func (s *Server) siteverify(w http.ResponseWriter, r *http.Request) {
	s.Calls.Add(1)
	if !widgettoken.Hold(r, &s.Delay) {
		return
	}
	secret, response, idempotency := s.params(r)
	reply := func() verifyReply {
		if n := s.InternalErrors.Load(); n > 0 && s.InternalErrors.CompareAndSwap(n, n-1) {
			return fail("internal-error")
		}
		switch {
		case secret == "":
			return fail("missing-input-secret")
		case response == "":
			return fail("missing-input-response")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if idempotency != "" {
			if prev, ok := s.answers[idempotency]; ok {
				return prev // a retry with the same key gets the same answer
			}
		}
		answer := s.decide(secret, response)
		if idempotency != "" {
			s.answers[idempotency] = answer
		}
		return answer
	}()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

// decide answers a verification; s.mu is held.
func (s *Server) decide(secret, response string) verifyReply {
	now := s.now().UTC()
	switch secret {
	case DummySecretPass:
		// Dummy secrets accept only the dummy token, so a real response never passes by mistake.
		if response != DummyToken {
			return fail("invalid-input-response")
		}
		return verifyReply{Success: true, ErrorCodes: []string{}, ChallengeTS: now.Format(time.RFC3339),
			Hostname: "example.com", Metadata: map[string]any{"result_with_testing_key": true}}
	case DummySecretFail:
		return fail("invalid-input-response")
	case DummySecretSpent:
		return fail("timeout-or-duplicate")
	case Secret:
	default:
		return fail("invalid-input-secret")
	}
	claims, ok := widgettoken.Open(s.key, response)
	if !ok {
		return fail("invalid-input-response")
	}
	if s.spent[response] || now.Sub(time.Unix(claims.Time, 0)) > tokenLifetime {
		return fail("timeout-or-duplicate")
	}
	s.spent[response] = true
	return verifyReply{Success: true, ErrorCodes: []string{}, ChallengeTS: time.Unix(claims.Time, 0).UTC().Format(time.RFC3339),
		Hostname: claims.Hostname, Action: claims.Action}
}

func (s *Server) params(r *http.Request) (secret, response, idempotency string) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var body map[string]string
		_ = json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10)).Decode(&body)
		return body["secret"], body["response"], body["idempotency_key"]
	}
	_ = r.ParseForm()
	return r.PostForm.Get("secret"), r.PostForm.Get("response"), r.PostForm.Get("idempotency_key")
}

// Mint returns a token as the widget of SiteKey would hand out on hostname for action.
func (s *Server) Mint(hostname, action string) string {
	return widgettoken.Seal(s.key, widgettoken.Claims{Hostname: hostname, Action: action, Time: s.now().Unix()})
}

// token is what the widget asks for when the visitor ticks the box: form sitekey, action, hostname.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if widgettoken.Preflight(w, r) {
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	_ = r.ParseForm()
	sitekey := r.PostForm.Get("sitekey")
	var token string
	switch sitekey {
	case SiteKey:
		token = s.Mint(r.PostForm.Get("hostname"), r.PostForm.Get("action"))
	case DummySiteKeyPass, DummySiteKeyInteractive, "1x00000000000000000000BB":
		token = DummyToken
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "blocked"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"token": token})
}

// Reset forgets spent tokens and idempotency answers.
func (s *Server) Reset(context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spent, s.answers = map[string]bool{}, map[string]verifyReply{}
}
