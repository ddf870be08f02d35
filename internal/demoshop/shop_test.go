package demoshop

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func newTestShop(t *testing.T) *httptest.Server {
	t.Helper()
	s, err := New(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url string, form url.Values, accept string) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, url, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPages(t *testing.T) {
	srv := newTestShop(t)
	cases := []struct {
		path   string
		status int
		want   []string
	}{
		{"/", 200, []string{"Limited sneaker A", "99.99", "5 left", "/auctions/42", "no bids yet"}},
		{"/products/1", 200, []string{`action="/checkout/1"`, `name="quantity"`, "Buy now"}},
		{"/products/nope", 404, []string{"Product not found"}},
		{"/auctions/42", 200, []string{`action="/auctions/42/bid"`, `name="amount"`, "Place bid", "100.00"}},
		{"/auctions/99", 404, []string{"Auction not found"}},
		{"/nowhere", 404, []string{"Page not found"}},
		{"/orders", 200, []string{"No orders yet"}},
	}
	for _, c := range cases {
		status, body := do(t, "GET", srv.URL+c.path, nil, "")
		if status != c.status {
			t.Errorf("%s: status %d, want %d", c.path, status, c.status)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: page lacks %q", c.path, w)
			}
		}
	}
}

func TestCheckout(t *testing.T) {
	srv := newTestShop(t)
	status, body := do(t, "POST", srv.URL+"/checkout/1", url.Values{"quantity": {"2"}}, "")
	if status != 200 || !strings.Contains(body, "Order #1 confirmed") {
		t.Fatalf("%d %s", status, body)
	}
	status, body = do(t, "POST", srv.URL+"/checkout/1", url.Values{"quantity": {"3"}}, "application/json")
	if status != 200 || body != `{"order_id":2,"product":"1","quantity":3}`+"\n" {
		t.Fatalf("%d %s", status, body)
	}
	if status, body = do(t, "POST", srv.URL+"/checkout/1", nil, ""); status != 409 || !strings.Contains(body, "Sold out") {
		t.Fatalf("sold out: %d %s", status, body)
	}
	for _, q := range []string{"0", "11", "abc", "-1", "1.5"} {
		if status, _ := do(t, "POST", srv.URL+"/checkout/2", url.Values{"quantity": {q}}, ""); status != 400 {
			t.Errorf("quantity %q: %d", q, status)
		}
	}
	if status, _ := do(t, "POST", srv.URL+"/checkout/99", nil, ""); status != 404 {
		t.Errorf("unknown product: %d", status)
	}
	if status, body := do(t, "GET", srv.URL+"/orders.json", nil, ""); status != 200 || !strings.Contains(body, `"stock":{"1":0,"2":50,"3":1000}`) {
		t.Fatalf("orders.json: %s", body)
	}
}

func TestCheckout_ConcurrentBuyersNeverOversell(t *testing.T) {
	srv := newTestShop(t)
	var ok, soldOut atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			resp, err := http.Post(srv.URL+"/checkout/1", "application/x-www-form-urlencoded", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				ok.Add(1)
			case 409:
				soldOut.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 || soldOut.Load() != 195 {
		t.Fatalf("%d sold, %d refused; want 5 and 195", ok.Load(), soldOut.Load())
	}
}

func TestBids(t *testing.T) {
	srv := newTestShop(t)
	bidURL := srv.URL + "/auctions/42/bid"
	if status, body := do(t, "POST", bidURL, url.Values{"amount": {"100.50"}}, ""); status != 200 || !strings.Contains(body, "Bid of 100.50 received") {
		t.Fatalf("%d %s", status, body)
	}
	if status, _ := do(t, "POST", bidURL, url.Values{"amount": {"100.50"}}, ""); status != 409 {
		t.Fatalf("equal bid: %d", status)
	}
	if status, body := do(t, "POST", bidURL, url.Values{"amount": {"101"}}, "application/json"); status != 200 || !strings.Contains(body, `"amount":"101.00"`) {
		t.Fatalf("%d %s", status, body)
	}
	for _, amount := range []string{"abc", "1.234", "-5", "", "1e3", "0"} {
		if status, _ := do(t, "POST", bidURL, url.Values{"amount": {amount}}, ""); status != 400 {
			t.Errorf("amount %q: %d", amount, status)
		}
	}
	if status, _ := do(t, "POST", bidURL, url.Values{"amount": {"99.99"}}, ""); status != 409 {
		t.Errorf("below the highest: %d", status)
	}
	if _, body := do(t, "GET", srv.URL+"/auctions/42", nil, ""); !strings.Contains(body, "Highest bid: 101.00") {
		t.Errorf("auction page: %s", body)
	}
}

func TestStreamIsIncremental(t *testing.T) {
	srv := newTestShop(t)
	resp, err := http.Get(srv.URL + "/stream?n=2&interval_ms=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The second line comes 5 s later; the first must arrive before it.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "tick 1\n" {
		t.Fatalf("%q %v", line, err)
	}
}

func TestSlow(t *testing.T) {
	srv := newTestShop(t)
	for _, ms := range []string{"10", "-5", "junk"} {
		if status, body := do(t, "GET", srv.URL+"/slow?ms="+ms, nil, ""); status != 200 || body != "done\n" {
			t.Fatalf("ms=%s: %d %q", ms, status, body)
		}
	}
}

func TestParseMoney(t *testing.T) {
	good := map[string]int64{"1": 100, "1.5": 150, "123.45": 12345}
	for in, want := range good {
		if got, err := parseMoney(in); err != nil || got != want {
			t.Errorf("%q: %d %v", in, got, err)
		}
	}
	for _, in := range []string{"", "abc", "1.234", "-5", "1.", ".5", "1e3"} {
		if _, err := parseMoney(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestSessionCookie(t *testing.T) {
	srv := newTestShop(t)
	resp, err := http.Get(srv.URL + "/auctions/42")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			session = c
		}
	}
	if session == nil || len(session.Value) != 32 || !session.HttpOnly {
		t.Fatalf("first visit: cookies %v", resp.Cookies())
	}
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.AddCookie(session)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(resp.Cookies()) != 0 {
		t.Fatalf("a visitor with a session got another: %v", resp.Cookies())
	}
}
