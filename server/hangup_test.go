package server

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hangUp sends one request over a connection of its own and closes the connection without waiting
// for the answer, as a shopper who closes the tab (or a client that times out) does.
func hangUp(t *testing.T, base, method, path string, header http.Header, body string) {
	t.Helper()
	u, _ := url.Parse(base)
	var conn net.Conn
	var err error
	if u.Scheme == "https" { // the TLS listener (tls_test.go): which certificate is not the point here
		conn, err = tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	} else {
		conn, err = net.Dial("tcp", u.Host)
	}
	if err != nil {
		t.Error(err)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", method, path, u.Host, len(body))
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n" + body)
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Error(err)
	}
	// Long enough for edgeq to read the request and start on it; the shop is still working on it.
	time.Sleep(20 * time.Millisecond)
	conn.Close()
}

// shopLedger is a slow shop that completes every order and bid it receives, whether or not the
// connection it came on is still open (as most shops do), and records it.
type shopLedger struct {
	mu     sync.Mutex
	orders map[string]int    // buyer -> orders
	bids   map[string]string // bid id -> amount
	busy   atomic.Int64      // requests being worked on
}

func newShopLedger() *shopLedger {
	return &shopLedger{orders: map[string]int{}, bids: map[string]string{}}
}

func (s *shopLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.busy.Add(1)
	defer s.busy.Add(-1)
	r.ParseForm()
	time.Sleep(150 * time.Millisecond) // payment, stock check, e-mail: the shop takes its time
	s.mu.Lock()
	if r.Header.Get("Edgeq-Admission-Id") != "" {
		s.orders[r.Header.Get("X-User")]++
	}
	if id := r.Header.Get("Edgeq-Bid-Id"); id != "" {
		s.bids[id] = r.PostForm.Get("amount")
	}
	s.mu.Unlock()
	fmt.Fprint(w, "order placed")
}

// A client that hangs up after sending an admitted request no longer gets its unit
// or bid back while the shop completes the order. Before, edgeq cancelled the request to the shop,
// counted the outcome as "error" and released it (5 hang-ups + 2 purchases = 7 orders at the shop
// against per_user_limit 2, edgeq's stock unchanged; the shop held bids edgeq had withdrawn). Now an
// admitted request runs to the shop's answer and is settled on it: under 50 concurrent hang-ups the
// shop's orders equal edgeq's admitted units, nobody is above the limit, and the shop's bids are
// edgeq's accepted bids.
// Over each protocol (tls_test.go): over HTTP/2 a hang-up is a reset stream.
func TestHangUps_AreSettledOnTheShopsAnswer(t *testing.T) {
	e := newTLSEdge(t)
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) { hangUpsSettledOnTheShopsAnswer(t, e, proto) })
	}
}

func hangUpsSettledOnTheShopsAnswer(t *testing.T, e *tlsEdge, proto string) {
	redisSrv := privateRedisWith(t)
	shop := newShopLedger()
	origin := httptest.NewServer(shop)
	t.Cleanup(origin.Close)
	in := e.start(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: "test-key"}
origin: {url: %q, timeout: 10s}
redis: {addr: %q}
log: {level: warn}
products:
  - {id: sneaker, stock: 1000, per_user_limit: 2}
auctions:
  - {id: lot, starting_price: "1.00", min_increment: "0.01", ends_at: %q}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "header:X-User"}
`, origin.URL, redisSrv.Addr(), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), nil)
	client, base := e.over(t, in, proto)

	const buyers = 50
	var wg sync.WaitGroup
	for i := range buyers {
		user := http.Header{"X-User": {fmt.Sprintf("buyer-%d", i)}}
		// Three hang-ups each, all at once...
		for range 3 {
			wg.Go(func() { hangUpOver(t, client, proto, base, "POST", "/checkout/sneaker", user, "") })
		}
		// ... and a bid that hangs up, with an amount of its own.
		form := http.Header{"X-User": user["X-User"], "Content-Type": {"application/x-www-form-urlencoded"}}
		wg.Go(func() {
			hangUpOver(t, client, proto, base, "POST", "/auctions/lot/bid", form, fmt.Sprintf("amount=%d.00", 10+i))
		})
	}
	wg.Wait()
	settled := func() {
		// Every request edgeq sent on reaches the shop's answer; edgeq settles right after it.
		time.Sleep(100 * time.Millisecond)
		eventually(t, "the shop is idle", func() bool { return shop.busy.Load() == 0 })
		time.Sleep(200 * time.Millisecond)
	}
	settled()
	// Then everyone buys twice more, one purchase after the other, waiting for the answers.
	for i := range buyers {
		wg.Go(func() {
			for range 2 {
				a, err := sendVia(client, "POST", base+"/checkout/sneaker", http.Header{"X-User": {fmt.Sprintf("buyer-%d", i)}, "Accept": {"application/json"}})
				if err != nil || a.status != 200 && a.status != 409 {
					t.Errorf("buyer %d: %v %d %s", i, err, a.status, a.body)
				}
			}
		})
	}
	wg.Wait()
	settled()

	var remaining struct {
		Remaining int `json:"remaining_stock"`
	}
	eventually(t, "the stock settles", func() bool {
		resp, err := client.Get(base + "/_edgeq/products/sneaker")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&remaining) == nil
	})
	shop.mu.Lock()
	defer shop.mu.Unlock()
	orders := 0
	for user, n := range shop.orders {
		orders += n
		if n > 2 {
			t.Errorf("%s has %d orders at the shop, per_user_limit 2", user, n)
		}
	}
	if admitted := 1000 - remaining.Remaining; orders != admitted || orders == 0 {
		t.Fatalf("the shop has %d orders, edgeq admitted %d units", orders, admitted)
	}

	// The shop's bids are exactly the bids edgeq kept.
	resp, err := client.Get(base + "/_edgeq/auctions/lot/bids?page_size=100")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var history struct {
		Items []struct {
			BidID  string `json:"bid_id"`
			Amount string `json:"amount"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&history); err != nil {
		t.Fatal(err)
	}
	kept := map[string]string{}
	for _, b := range history.Items {
		kept[b.BidID] = b.Amount
	}
	if len(shop.bids) == 0 || len(kept) != len(shop.bids) {
		t.Fatalf("the shop holds %d bids, edgeq kept %d", len(shop.bids), len(kept))
	}
	for id, amount := range shop.bids {
		if kept[id] != amount {
			t.Errorf("bid %s (%s) is at the shop but edgeq has %q", id, amount, kept[id])
		}
	}
}
