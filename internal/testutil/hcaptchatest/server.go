// Package hcaptchatest is a stand-in for hCaptcha that behaves as hCaptcha documents
// (docs.hcaptcha.com), so that tests and demos run without the internet: siteverify (a form POST of
// secret, response, remoteip and sitekey, answered with success, challenge_ts, hostname, credit and
// the documented error codes; the documented test keys) and a widget script, /1/api.js, that renders
// a checkbox in each .h-captcha and fills in the form's h-captcha-response and g-recaptcha-response.
// Serve it with net/http, as httptest.NewServer(hcaptchatest.New()).
package hcaptchatest

import (
	_ "embed"
	"encoding/json"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/widgettoken"
)

// hCaptcha's test keys (docs.hcaptcha.com, "Integration Testing: Test Keys"): the test secret accepts
// the test response only, and only for the test site key.
const (
	TestSiteKey  = "10000000-ffff-ffff-ffff-000000000001"
	TestSecret   = "0x0000000000000000000000000000000000000000"
	TestResponse = "10000000-aaaa-bbbb-cccc-000000000001"
	// TestHostname is the hostname siteverify answers for the test keys: no real site.
	TestHostname = "dummy-key-pass"
)

// The stand-in's own key pair: a widget with SiteKey hands out real tokens (signed, single use, bound
// to the page's hostname and to SiteKey) that only Secret verifies, for TokenLifetime (as hCaptcha's).
const (
	SiteKey       = "e0e9e000-0000-4000-8000-00000000ed9e"
	Secret        = "0xed9e000000000000000000000000000000000001"
	TokenLifetime = 120 * time.Second
)

var (
	//go:embed widget.js
	widgetJS []byte
	//go:embed widget.css
	widgetCSS []byte
)

// Server is the stand-in. Its knobs make siteverify misbehave for tests.
type Server struct {
	key []byte

	mu    sync.Mutex
	spent map[string]time.Time // verified tokens, by the time they were minted
	last  url.Values           // the last siteverify form

	// Failures makes the next n siteverify calls answer HTTP 500 (hCaptcha has no internal-error code).
	Failures atomic.Int64
	// Delay holds every siteverify answer this long (to test timeouts).
	Delay atomic.Int64 // nanoseconds
	// Calls counts siteverify calls.
	Calls atomic.Int64
	// Styles counts fetches of the widget's style sheet (a page's CSP lets it load, or not).
	Styles atomic.Int64
	// RequireRemoteIP answers missing-remoteip to a call without remoteip, as an account that requires it.
	RequireRemoteIP atomic.Bool
}

// New returns a stand-in with a fresh signing key.
func New() *Server {
	return &Server{key: widgettoken.NewKey(), spent: map[string]time.Time{}}
}

// ServeHTTP serves /1/api.js (the widget) with its /1/widget.css, /siteverify, and /1/token (what the
// widget asks for).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/1/api.js":
		asset(w, r, "text/javascript; charset=utf-8", widgetJS)
	case "/1/widget.css":
		s.Styles.Add(1)
		asset(w, r, "text/css; charset=utf-8", widgetCSS)
	case "/siteverify":
		s.siteverify(w, r)
	case "/1/token":
		s.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func asset(w http.ResponseWriter, r *http.Request, contentType string, body []byte) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// answer is siteverify's documented JSON.
type answer struct {
	Success     bool     `json:"success"`
	ChallengeTS string   `json:"challenge_ts,omitempty"`
	Hostname    string   `json:"hostname,omitempty"`
	Credit      *bool    `json:"credit,omitempty"`
	ErrorCodes  []string `json:"error-codes,omitempty"`
}

func refuse(code string) answer { return answer{ErrorCodes: []string{code}} }

func passed(hostname string, at time.Time) answer {
	credit := false
	return answer{Success: true, ChallengeTS: at.UTC().Format(time.RFC3339), Hostname: hostname, Credit: &credit}
}

func (s *Server) siteverify(w http.ResponseWriter, r *http.Request) {
	s.Calls.Add(1)
	if !widgettoken.Hold(r, &s.Delay) {
		return
	}
	if n := s.Failures.Load(); n > 0 && s.Failures.CompareAndSwap(n, n-1) {
		http.Error(w, "internal server error", http.StatusInternalServerError)
		return
	}
	var reply answer
	form, ok := readForm(r)
	s.mu.Lock()
	s.last = form
	if ok {
		reply = s.decide(form)
	} else {
		reply = refuse("bad-request")
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

// readForm reads a siteverify request: a POST with a form-encoded body.
func readForm(r *http.Request) (url.Values, bool) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Method != http.MethodPost || ct != "application/x-www-form-urlencoded" {
		return url.Values{}, false
	}
	r.Body = http.MaxBytesReader(nil, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return url.Values{}, false
	}
	return r.PostForm, true
}

// decide answers one verification; s.mu is held.
func (s *Server) decide(form url.Values) answer {
	secret, response, sitekey, remoteip := form.Get("secret"), form.Get("response"), form.Get("sitekey"), form.Get("remoteip")
	switch {
	case secret == "":
		return refuse("missing-input-secret")
	case response == "":
		return refuse("missing-input-response")
	case remoteip == "" && s.RequireRemoteIP.Load():
		return refuse("missing-remoteip")
	}
	if _, err := netip.ParseAddr(remoteip); remoteip != "" && err != nil {
		return refuse("invalid-remoteip")
	}
	var own string // the site key the secret belongs to
	switch secret {
	case TestSecret:
		own = TestSiteKey
	case Secret:
		own = SiteKey
	default:
		return refuse("invalid-input-secret")
	}
	if sitekey != "" && sitekey != own {
		return refuse("sitekey-secret-mismatch")
	}
	now := time.Now()
	if secret == TestSecret {
		if response != TestResponse {
			return refuse("not-using-dummy-passcode")
		}
		return passed(TestHostname, now)
	}
	c, ok := widgettoken.Open(s.key, response)
	if !ok || c.SiteKey != own {
		return refuse("invalid-input-response")
	}
	minted := time.Unix(c.Time, 0)
	if _, seen := s.spent[response]; seen {
		return refuse("already-seen-response")
	}
	if now.Sub(minted) > TokenLifetime {
		return refuse("expired-input-response")
	}
	s.spent[response] = minted
	if len(s.spent)%256 == 0 { // forget tokens that have expired anyway
		for t, at := range s.spent {
			if now.Sub(at) > TokenLifetime {
				delete(s.spent, t)
			}
		}
	}
	return passed(c.Hostname, minted)
}

// LastForm is a copy of the form of the last siteverify call (empty before one, or for a bad request).
func (s *Server) LastForm() url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := url.Values{}
	for k, v := range s.last {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// Mint returns a response as the widget of SiteKey hands out on a page of hostname.
func (s *Server) Mint(hostname string) string { return s.MintAt(hostname, time.Now()) }

// MintAt is Mint for a widget solved at time at (an earlier one has expired after TokenLifetime).
func (s *Server) MintAt(hostname string, at time.Time) string {
	return widgettoken.Seal(s.key, widgettoken.Claims{Hostname: hostname, SiteKey: SiteKey, Time: at.Unix()})
}

// token answers the widget when the visitor ticks the box: a form POST of sitekey and hostname, from
// the protected site's pages (another origin).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if widgettoken.Preflight(w, r) {
		return
	}
	form, ok := readForm(r)
	w.Header().Set("Content-Type", "application/json")
	var response string
	switch sitekey := form.Get("sitekey"); {
	case ok && sitekey == TestSiteKey:
		response = TestResponse
	case ok && sitekey == SiteKey:
		response = s.Mint(form.Get("hostname"))
	default: // hCaptcha's widget reports invalid-data to its error-callback
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid-data"})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"response": response})
}

// Reset forgets the spent tokens and the last form.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spent, s.last = map[string]time.Time{}, nil
}
