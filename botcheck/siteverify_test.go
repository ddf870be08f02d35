package botcheck_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/turnstiletest"
	"github.com/edgeq/edgeq/internal/web"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// tsCheck is one Turnstile response to verify, and where it was sent from and to.
type tsCheck struct{ Response, RemoteIP, Host, Action string }

// tsClient is the turnstile provider, verifying tsChecks.
type tsClient struct{ *botcheck.Check }

func newTS(t *testing.T, cfg config.Turnstile, s *store.Store, reg prometheus.Registerer) tsClient {
	t.Helper()
	full := config.Default()
	full.Turnstile = cfg
	c, err := botcheck.New(botcheck.Env{Config: full, Store: s}, reg)
	if err != nil || c == nil {
		t.Fatalf("turnstile provider: %v %v", c, err)
	}
	return tsClient{c}
}

func (c tsClient) Verify(ctx context.Context, chk tsCheck) botcheck.Verdict {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://"+chk.Host+"/", nil)
	req.Host = chk.Host
	return c.Check.Verify(ctx, botcheck.Submission{
		Solution: botcheck.Solution{"cf-turnstile-response": chk.Response}, Request: req, Action: chk.Action,
	})
}

// Counter is the turnstile provider's own counter, edgeq_turnstile_verifications_total.
func (c tsClient) Counter() *prometheus.CounterVec {
	return c.Check.Provider().(interface{ Counted() *prometheus.CounterVec }).Counted()
}

func client(t *testing.T, s *store.Store, verifyURL, secret, onError string, hostnames ...string) (tsClient, *prometheus.Registry) {
	t.Helper()
	cfg := config.Default().Turnstile
	cfg.SiteKey, cfg.SecretKey, cfg.VerifyURL, cfg.OnError = turnstiletest.SiteKey, secret, verifyURL, onError
	cfg.Timeout = 300 * time.Millisecond
	cfg.Hostnames = hostnames
	reg := prometheus.NewRegistry()
	return newTS(t, cfg, s, reg), reg
}

func TestVerify_Table(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		fake := turnstiletest.New()
		srv := httptest.NewServer(fake)
		defer srv.Close()
		verifyURL := srv.URL + "/turnstile/v0/siteverify"
		c, reg := client(t, s, verifyURL, turnstiletest.Secret, "closed")
		ctx := context.Background()
		good := fake.Mint("shop.example", "edgeq_join")

		cases := []struct {
			name   string
			chk    tsCheck
			ok     bool
			result string
		}{
			{"missing", tsCheck{Host: "shop.example"}, false, botcheck.ResultMissing},
			{"garbage", tsCheck{Response: "not-a-token", Host: "shop.example"}, false, botcheck.ResultInvalid},
			{"oversized", tsCheck{Response: string(make([]byte, 3000)), Host: "shop.example"}, false, botcheck.ResultInvalid},
			{"good", tsCheck{Response: good, Host: "shop.example:8443", Action: "edgeq_join", RemoteIP: "203.0.113.9"}, true, botcheck.ResultSuccess},
			{"replayed", tsCheck{Response: good, Host: "shop.example", Action: "edgeq_join"}, false, botcheck.ResultReplayed},
			{"wrong hostname", tsCheck{Response: fake.Mint("evil.example", ""), Host: "shop.example"}, false, botcheck.ResultHostname},
			{"wrong action", tsCheck{Response: fake.Mint("shop.example", "other"), Host: "shop.example", Action: "edgeq_join"}, false, botcheck.ResultAction},
			{"any action when none is expected", tsCheck{Response: fake.Mint("shop.example", "shop_widget"), Host: "shop.example"}, true, botcheck.ResultSuccess},
		}
		for _, c2 := range cases {
			t.Run(c2.name, func(t *testing.T) {
				v := c.Verify(ctx, c2.chk)
				if v.OK != c2.ok || v.Result != c2.result {
					t.Fatalf("verdict %+v, want ok=%v result=%s", v, c2.ok, c2.result)
				}
				if v.OK && (v.At.IsZero() || time.Since(v.At) > time.Minute) {
					t.Fatalf("challenge time %s", v.At)
				}
			})
		}
		if got := testutil.ToFloat64(c.Counter().WithLabelValues(botcheck.ResultSuccess)); got != 2 {
			t.Errorf("success counter %v", got)
		}
		_ = reg

		// A response spent at Cloudflare (not through this edgeq) is refused by siteverify itself.
		spent := fake.Mint("shop.example", "")
		other, _ := client(t, nil, verifyURL, turnstiletest.Secret, "closed")
		if v := other.Verify(ctx, tsCheck{Response: spent, Host: "shop.example"}); !v.OK {
			t.Fatalf("first use elsewhere: %+v", v)
		}
		if v := c.Verify(ctx, tsCheck{Response: spent, Host: "shop.example"}); v.OK || v.Result != botcheck.ResultInvalid {
			t.Fatalf("spent at siteverify: %+v", v)
		}
	})
}

func TestVerify_RetriesOnceOnInternalError(t *testing.T) {
	fake := turnstiletest.New()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c, _ := client(t, storetest.Embedded(t), srv.URL+"/turnstile/v0/siteverify", turnstiletest.Secret, "closed", "shop.example")
	fake.InternalErrors.Store(1)
	if v := c.Verify(context.Background(), tsCheck{Response: fake.Mint("shop.example", ""), Host: "x"}); !v.OK {
		t.Fatalf("after one internal-error: %+v", v)
	}
	if fake.Calls.Load() != 2 {
		t.Fatalf("siteverify called %d times, want 2", fake.Calls.Load())
	}
	// Two in a row: siteverify is unavailable, and on_error decides.
	fake.InternalErrors.Store(2)
	if v := c.Verify(context.Background(), tsCheck{Response: fake.Mint("shop.example", ""), Host: "x"}); v.OK || v.Result != botcheck.ResultUnavailableClosed {
		t.Fatalf("after two internal-errors: %+v", v)
	}
}

func TestVerify_SiteverifyDown(t *testing.T) {
	fake := turnstiletest.New()
	slow := httptest.NewServer(fake)
	defer slow.Close()
	fake.Delay.Store(int64(2 * time.Second))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, target := range []struct{ name, url string }{
		{"unreachable", down.URL + "/siteverify"},
		{"timeout", slow.URL + "/turnstile/v0/siteverify"},
	} {
		for _, policy := range []struct {
			onError string
			ok      bool
			result  string
		}{{"closed", false, botcheck.ResultUnavailableClosed}, {"open", true, botcheck.ResultUnavailableOpen}} {
			t.Run(target.name+" "+policy.onError, func(t *testing.T) {
				c, _ := client(t, storetest.Embedded(t), target.url, turnstiletest.Secret, policy.onError, "shop.example")
				v := c.Verify(context.Background(), tsCheck{Response: fake.Mint("shop.example", ""), Host: "shop.example"})
				if v.OK != policy.ok || v.Result != policy.result {
					t.Fatalf("verdict %+v", v)
				}
				if got := testutil.ToFloat64(c.Counter().WithLabelValues(policy.result)); got != 1 {
					t.Fatalf("counter %s = %v", policy.result, got)
				}
			})
		}
	}
}

func TestVerify_DummySecrets(t *testing.T) {
	fake := turnstiletest.New()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cases := []struct {
		secret, response string
		ok               bool
	}{
		{turnstiletest.DummySecretPass, turnstiletest.DummyToken, true},
		{turnstiletest.DummySecretPass, fake.Mint("localhost", ""), false}, // dummy secrets take only the dummy token
		{turnstiletest.DummySecretFail, turnstiletest.DummyToken, false},
		{turnstiletest.DummySecretSpent, turnstiletest.DummyToken, false},
	}
	for _, c := range cases {
		cl, _ := client(t, nil, srv.URL+"/turnstile/v0/siteverify", c.secret, "closed")
		if v := cl.Verify(context.Background(), tsCheck{Response: c.response, Host: "localhost:8080"}); v.OK != c.ok {
			t.Errorf("%s with %q: %+v", c.secret, c.response, v)
		}
	}
	if !botcheck.IsTestingSecret(turnstiletest.DummySecretPass) || botcheck.IsTestingSecret(turnstiletest.Secret) {
		t.Fatal("IsTestingSecret")
	}
}

// The single-use check needs the store. When the store cannot be used, the request's on_store_error
// decides, as for every other step: closed refuses with 503 STORE_UNAVAILABLE before siteverify is
// asked, open checks the response with siteverify without the single-use guard. Before, this check
// let every response through silently whatever the route said.
func TestVerify_StoreDownFollowsOnStoreError(t *testing.T) {
	fake := turnstiletest.New()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dead := store.Wrap(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond}),
		store.Keys{Prefix: "edgeq"})
	c, _ := client(t, dead, srv.URL+"/turnstile/v0/siteverify", turnstiletest.Secret, "closed")
	ctxWith := func(p web.StorePolicy) context.Context {
		info := web.NewRequest(nil, "test")
		info.Store = p
		return web.WithRequest(context.Background(), info)
	}
	chk := tsCheck{Response: fake.Mint("shop.example", ""), Host: "shop.example"}

	for _, p := range []web.StorePolicy{{}, {Degraded: true}} {
		v := c.Verify(ctxWith(p), chk)
		if v.OK || v.Result != botcheck.ResultStoreUnavailable {
			t.Fatalf("closed %+v: %+v", p, v)
		}
		if e := v.Refusal(); e.Status != 503 || e.Code != "STORE_UNAVAILABLE" {
			t.Fatalf("closed %+v: refusal %v", p, e)
		}
	}
	if n := fake.Calls.Load(); n != 0 {
		t.Fatalf("siteverify asked %d times for refused checks", n)
	}
	if got := testutil.ToFloat64(c.Counter().WithLabelValues(botcheck.ResultStoreUnavailable)); got != 2 {
		t.Fatalf("store_unavailable counted %v times", got)
	}

	var bypassed counter
	v := c.Verify(ctxWith(web.StorePolicy{Open: true, Bypassed: &bypassed}), chk)
	if !v.OK || v.Result != botcheck.ResultSuccess || bypassed != 1 {
		t.Fatalf("open: %+v, bypass counted %d", v, bypassed)
	}
	if e := v.Refusal(); e.Code != "INVALID_TURNSTILE_TOKEN" {
		t.Fatalf("a failed check that is not about the store: %v", e)
	}
}

type counter int

func (c *counter) Inc() { *c++ }
