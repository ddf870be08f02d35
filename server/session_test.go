package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// sessionConfig is two queues with a short token_ttl and session_renewal: "long" with the default
// max_session, "short" with a max_session of four token lifetimes. Both replicas of a test share the
// store and the signing key.
func sessionConfig(originURL, redisAddr, key string) string {
	return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q}
redis: {addr: %q}
tokens: {signing_key_file: %q, leeway: 0s}
log: {level: warn}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: long, capacity: 100, token_ttl: 6s, session_renewal: true}
  - {id: short, capacity: 100, token_ttl: 6s, session_renewal: true, max_session: 24s}
routes:
  - {name: long, match: "GET /long/", queue: long}
  - {name: short, match: "GET /short/", queue: short}
`, originURL, redisAddr, key)
}

// shopper is one browser (a cookie jar shared by the replicas, all on 127.0.0.1) or, with bearer set,
// an app that sends its token in Authorization and takes renewed ones from Edgeq-Token.
type shopper struct {
	client *http.Client
	queue  string
	bearer string
}

func newShopper(t *testing.T, queue string) *shopper {
	jar, _ := cookiejar.New(nil)
	return &shopper{queue: queue, client: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// visit opens a gated page as a browser navigation; it returns the status, the Location of a
// redirect, and the token the response handed over (cookie or Edgeq-Token), if any.
func (s *shopper) visit(t *testing.T, base string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/"+s.queue+"/page", nil)
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Sec-Fetch-Dest", "document")
	if s.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+s.bearer)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	handed := resp.Header.Get("Edgeq-Token")
	for _, c := range resp.Cookies() {
		if c.Name == "edgeq_tk_"+s.queue && c.Value != "" {
			handed = c.Value
		}
	}
	if s.bearer != "" && handed != "" {
		s.bearer = handed
	}
	return resp.StatusCode, resp.Header.Get("Location"), handed
}

// tokenOf is the shopper's current token.
func (s *shopper) tokenOf(t *testing.T, base string) string {
	if s.bearer != "" {
		return s.bearer
	}
	u, _ := url.Parse(base)
	for _, c := range s.client.Jar.Cookies(u) {
		if c.Name == "edgeq_tk_"+s.queue {
			return c.Value
		}
	}
	return ""
}

type sessionClaims struct {
	Sub string `json:"sub"`
	Pos int64  `json:"pos"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
	Jti string `json:"jti"`
}

func claimsOf(t *testing.T, raw string) sessionClaims {
	t.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", raw)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c sessionClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func activeTokens(t *testing.T, in *instance, queue string) int64 {
	t.Helper()
	var body struct {
		ActiveNum int64 `json:"active_num"`
	}
	adminJSON(t, in, "GET", "/api/queue/"+queue+"/active_token_num", "", &body)
	return body.ActiveNum
}

func adminJSON(t *testing.T, in *instance, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, in.admin+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer test-key")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// Sliding sessions at a tenth of a real drop's times (token_ttl 6 s for 60 s, a request every 2 s
// for every 20 s, 30 s for 5 minutes, max_session 24 s for 4 minutes), over two replicas on one
// redis-server: shoppers active on alternating replicas stay inside for five token lifetimes, by
// cookie and by bearer token; the one with max_session 24s is sent to the waiting page once it is
// used up; an idle one expires with its first token; a revoked one is refused within a second on the
// other replica and never renewed; active_num counts each live shopper once throughout.
func TestSessions_ActiveShoppersStayIdleOnesExpireRevokedOnesAreNeverRenewed(t *testing.T) {
	redisSrv := privateRedis(t)
	key := writeKey(t, t.TempDir(), "signing.pem")
	origin := newOrigin(t)
	replicas := []*instance{
		start(t, sessionConfig(origin.URL, redisSrv.Addr(), key)),
		start(t, sessionConfig(origin.URL, redisSrv.Addr(), key)),
	}
	active, app, short := newShopper(t, "long"), newShopper(t, "long"), newShopper(t, "short")
	idle, revoked := newShopper(t, "long"), newShopper(t, "long")
	for _, s := range []*shopper{active, app, short, idle, revoked} {
		if code, loc, tok := s.visit(t, replicas[0].public); code != 200 || tok == "" {
			t.Fatalf("first visit of %s: %d %s, token %q", s.queue, code, loc, tok)
		}
	}
	app.bearer = app.tokenOf(t, replicas[0].public) // from now on an app: Authorization, not the cookie
	app.client.Jar, _ = cookiejar.New(nil)
	first := map[*shopper]sessionClaims{}
	for _, s := range []*shopper{active, app, short, idle} {
		first[s] = claimsOf(t, s.tokenOf(t, replicas[0].public))
	}

	// The revoked shopper's session is completed through replica 0's admin API; replica 1 refuses its
	// token within a second.
	revokedClaims := claimsOf(t, revoked.tokenOf(t, replicas[0].public))
	if code := adminJSON(t, replicas[0], "POST", "/api/queue/update_token_status",
		fmt.Sprintf(`{"queue_id":"long","request_id":%q,"status":1}`, revokedClaims.Sub), nil); code != 200 {
		t.Fatalf("update_token_status: %d", code)
	}
	revokedAt := time.Now()
	for {
		code, loc, _ := revoked.visit(t, replicas[1].public)
		if code == http.StatusFound && strings.Contains(loc, "/_edgeq/wait/long") {
			break
		}
		if time.Since(revokedAt) > time.Second {
			t.Fatalf("revoked token still accepted by the other replica after %v: %d", time.Since(revokedAt), code)
		}
		time.Sleep(50 * time.Millisecond)
	}

	begin := time.Unix(first[active].Iat, 0)
	shortEnd := time.Unix(first[short].Iat+24, 0) // max_session after its first token
	renewedTokens := map[*shopper]int{}
	var mu sync.Mutex
	for round := 0; ; round++ {
		at := begin.Add(time.Duration(round) * 2 * time.Second)
		if at.After(begin.Add(30 * time.Second)) {
			break
		}
		time.Sleep(time.Until(at.Add(300 * time.Millisecond)))
		elapsed := time.Since(begin)
		// Renewals fall on even rounds (every 4 s): they alternate between the replicas too.
		in := replicas[(round/2)%2]
		var wg sync.WaitGroup
		for _, s := range []*shopper{active, app, short} {
			wg.Go(func() {
				pastMax := time.Now().After(shortEnd)
				code, loc, handed := s.visit(t, in.public)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case s == short && pastMax:
					if code != http.StatusFound || !strings.Contains(loc, "/_edgeq/wait/short") {
						t.Errorf("%v: the shopper past max_session got %d %q, want the waiting page", elapsed, code, loc)
					}
					if handed != "" && claimsOf(t, handed).Exp > first[s].Iat+24 {
						t.Errorf("%v: a token past max_session was handed over: %+v", elapsed, claimsOf(t, handed))
					}
				case code != 200:
					t.Errorf("%v: an active %s shopper (bearer %t) got %d %q", elapsed, s.queue, s.bearer != "", code, loc)
				case handed != "":
					c := claimsOf(t, handed)
					if c.Sub != first[s].Sub || c.Pos != first[s].Pos || c.Iat != first[s].Iat || c.Jti == first[s].Jti {
						t.Errorf("renewed token %+v does not continue %+v (same sub, pos, iat; new jti)", c, first[s])
					}
					renewedTokens[s]++
				}
			})
		}
		wg.Wait()
		// The revoked shopper keeps trying and is never let in nor handed a token.
		if code, _, handed := revoked.visit(t, in.public); code == 200 || handed != "" {
			t.Errorf("%v: revoked shopper got %d, token %q", elapsed, code, handed)
		}
		// Each live session of queue long counts once: the two active shoppers, and the idle one until
		// its token's deadline (6 s) has passed on the store.
		if elapsed > 7*time.Second {
			for _, r := range replicas {
				if n := activeTokens(t, r, "long"); n != 2 {
					t.Errorf("%v: active_num of long on %s = %d, want 2 (two renewed sessions)", elapsed, r.admin, n)
				}
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	for _, s := range []*shopper{active, app} {
		if renewedTokens[s] < 5 {
			t.Errorf("an active shopper's token was renewed %d times in 30 s with token_ttl 6s", renewedTokens[s])
		}
	}
	// The idle shopper's token ran out with its first lifetime.
	if code, loc, _ := idle.visit(t, replicas[1].public); code != http.StatusFound || !strings.Contains(loc, "/_edgeq/wait/long") {
		t.Errorf("idle shopper after 30 s: %d %q, want the waiting page", code, loc)
	}
	for _, in := range replicas {
		if n := in.metric(t, `edgeq_sessions_renewed_total{queue="long"}`); n < 1 {
			t.Errorf("edgeq_sessions_renewed_total on %s = %v", in.admin, n)
		}
	}
}
