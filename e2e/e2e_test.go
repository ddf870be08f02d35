// Package e2e runs edgeq's pages in a real headless Chromium: the demo shop, edgeq (the real server
// wiring) on the private redis-server, and the Turnstile stand-in, driven by browser.mjs through
// playwright-core.
//
// Requirements: Chromium at /usr/bin/chromium (Debian packages chromium, chromium-driver), Node.js,
// and `npm ci` in this directory. With CI set, a missing one fails the test; otherwise the test is
// skipped and says what to install.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/demoshop"
	"github.com/edgeq/edgeq/internal/ids"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/testutil/turnstiletest"
	"github.com/edgeq/edgeq/server"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const adminKey = "e2e-admin-key"

// requireBrowser checks that Chromium, Node.js and playwright-core are there.
func requireBrowser(t *testing.T) (node string) {
	t.Helper()
	var missing []string
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, "Chromium at "+chromium+" (apt-get install chromium chromium-driver)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "Node.js (apt-get install nodejs npm)")
	}
	for _, module := range []string{"playwright-core", "axe-core"} {
		if _, err := os.Stat("node_modules/" + module); err != nil {
			missing = append(missing, module+" (npm ci in e2e/)")
		}
	}
	if len(missing) > 0 {
		msg := "browser tests need " + strings.Join(missing, ", ") + "; .ci/run installs them"
		if storetest.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg + " (skipped outside CI)")
	}
	return node
}

// stack is a running deployment for the browser.
type stack struct {
	edgeq, admin string
	tls          string // the TLS listener's base URL, when the configuration has one (tls_test.go)
	configPath   string
	fake         *turnstiletest.Server
	originHits   *atomic.Int64 // every request that reached the shop
	holds        chan struct{} // a GET /e2e/hold reached the shop
}

// startStack is the deployment of TestBrowser: the shop's routes and a queue per scenario.
func startStack(t *testing.T) *stack {
	t.Helper()
	return launch(t, func(origin, ts string) string {
		return fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", api_key: %q}
origin: {url: %q}
redis: {addr: %q}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
log: {level: warn}
turnstile:
  site_key: %q
  secret_key: %q
  verify_url: "%s/turnstile/v0/siteverify"
  script_url: "%s/turnstile/v0/api.js"
queues:
  - {id: drop, title: "Sneaker drop", capacity: 1}
  - {id: quiet, title: "Order history", capacity: 1}
  - {id: club, title: "Auction room", capacity: 1, turnstile: true}
  - {id: shots, title: "Sneaker drop", capacity: 0}
  - {id: xss, title: "<script>alert('title')</script>", capacity: 0}
  - {id: sale, title: "Flash sale", capacity: 3}
  - {id: still, title: "Nobody served", capacity: 0}
  # Drops: a pre-queue an hour before its opening (the scenario opens it), one whose pre-queue has not
  # begun, one to pause, and one that sells out with its product.
  - {id: soon, title: "Midnight drop", capacity: 5, opens_at: %q, prequeue: 2h, shuffle: true}
  - {id: later, title: "Next week's drop", capacity: 5, opens_at: %q, prequeue: 10m}
  - {id: pause, title: "Paused drop", capacity: 1}
  - {id: gone, title: "Last pairs", capacity: 0, sold_out_with: ["last-pair"]}
  # A presale by invitation, its line full.
  - {id: vip, title: "Members' presale", capacity: 0, invite_only: true}
  # The drop the report is read after: a narrow door, places given up after 4 s.
  - {id: after, title: "Cap drop", capacity: 3, position_expiry: 4s}
  # One jersey per person, bought and bought again (the scenario onePerBrowser).
  - {id: once, title: "One per person", capacity: 5}
products:
  # edgeq guards two of the shop's SKUs: jersey (sold in the dashboard's simulated sale) and sneaker-b,
  # which edgeq has none of; sneaker-a passes unguarded (unknown_product: pass).
  - {id: "jersey", stock: 300, per_user_limit: 1, name: "Team jersey"}
  - {id: "sneaker-b", stock: 0, per_user_limit: 1, name: "Limited sneaker B"}
  - {id: "last-pair", stock: 1, per_user_limit: 1, name: "Last pair"}
  - {id: "cap", stock: 40, per_user_limit: 1, name: "Drop cap"}
routes:
  # The shop under two host names of its own (Chromium takes every *.localhost for this machine): its
  # product pages, add-to-cart and checkout on the once queue, buyers counted by visitor id on one and
  # by place in line on the other. Listed first: first match wins.
  - {name: once_page_visitor, match: "GET visitor.localhost/p/{slug}", queue: once}
  - {name: once_page_token, match: "GET token.localhost/p/{slug}", queue: once}
  - {name: once_add_visitor, match: "POST visitor.localhost/api/carts/{cart}/items", queue: once, refusal: {json: '{"error": {"code": "{{.Code}}", "message": "{{.Message}}"}}'},
     admission: {type: stock, unknown_product: pass, product: "json:sku", quantity: "json:quantity", user: visitor, release_on: ["4xx", "5xx", "error"]}}
  - {name: once_add_token, match: "POST token.localhost/api/carts/{cart}/items", queue: once, refusal: {json: '{"error": {"code": "{{.Code}}", "message": "{{.Message}}"}}'},
     admission: {type: stock, unknown_product: pass, product: "json:sku", quantity: "json:quantity", user: token, release_on: ["4xx", "5xx", "error"]}}
  - {name: once_checkout_visitor, match: "POST visitor.localhost/api/carts/{cart}/checkout", queue: once, complete_on: ["2xx"]}
  - {name: once_checkout_token, match: "POST token.localhost/api/carts/{cart}/checkout", queue: once, complete_on: ["2xx"]}
  # /products/{id} is the waiting room's (drop, capacity 1, kept full); the shop scenarios browse the
  # same pages under their second URL, on the sale queue, as config.example.yaml gates both.
  - {name: products, match: "GET /products/{id}", queue: drop}
  - {name: products_by_slug, match: "GET /p/{slug}", queue: sale}
  - {name: orders, match: "GET /orders", queue: quiet}
  - {name: still, match: "GET /still", queue: still}
  - {name: auctions, match: "GET /auctions/42", queue: club}
  - {name: drop_soon, match: "GET /orders/soon", queue: soon}
  - {name: drop_pause, match: "GET /orders/pause", queue: pause}
  - {name: drop_gone, match: "GET /orders/gone", queue: gone}
  - {name: presale, match: "GET /orders/vip", queue: vip}
  # Buys the last pair without the shop (it has no such page): only a transport error gives it back.
  - name: buy_last_pair
    match: "POST /buy/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-Buyer", release_on: ["error"]}
  - name: add_to_cart
    match: "POST /api/carts/{cart}/items"
    queue: sale
    admission: {type: stock, unknown_product: pass, product: "json:sku", quantity: "json:quantity", user: token, release_on: ["4xx", "5xx", "error"]}
    # edgeq's refusals in the shop's own error shape, which its cart script reads.
    refusal: {json: '{"error": {"code": "{{.Code}}", "message": "{{.Message}}"}}'}
  # The shop's GraphQL endpoint: only addItemToOrder is guarded; its reads (cart badge, stock) pass.
  - name: add_to_cart_graphql
    match: "/api/graphql"
    queue: sale
    graphql: {fields: [addItemToOrder], refuse_fields: [adjustOrderLine]}
    admission: {type: stock, unknown_product: pass, product: "graphql:productVariantId", quantity: "graphql:quantity", user: token, release_on: ["4xx", "5xx", "error", "answer:data.$field.errorCode", "answer:!data.$field"]}
  - name: add_to_cart_form
    match: "POST /cart/items"
    queue: sale
    admission: {type: stock, unknown_product: pass, product: "form:sku", quantity: "form:quantity", user: token, release_on: ["4xx", "5xx", "error"]}
  - name: checkout
    match: "POST /api/carts/{cart}/checkout"
    queue: sale
    max_in_flight: 1
    complete_on: ["2xx"]
  - name: bid
    match: "POST /auctions/{id}/bid"
    admission: {type: bid, auction: "path:id", amount: "form:amount", user: "cookie:shop_session"}
auctions:
  - {id: "7", starting_price: "20.00", ends_at: %q}
`, adminKey, origin, storetest.RedisAddr(t), turnstiletest.SiteKey, turnstiletest.Secret, ts, ts,
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339), time.Now().Add(7*24*time.Hour).UTC().Format(time.RFC3339),
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	})
}

// launch starts the demo shop behind a counter of the requests that reach it, the Turnstile
// stand-in, and edgeq on the configuration config writes for their URLs. Besides the shop's pages the
// origin answers GET /e2e/hold by holding the request until its client leaves or the test ends (a
// request that keeps an in-flight slot); holds reports each one that arrives.
func launch(t *testing.T, config func(origin, turnstile string) string) *stack {
	t.Helper()
	shop, err := demoshop.New(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	holds, release := make(chan struct{}, 16), make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/e2e/hold" {
			select {
			case holds <- struct{}{}:
			default:
			}
			select {
			case <-r.Context().Done():
			case <-release: // the test is over (edgeq lets a request outlast its visitor)
			}
			return
		}
		shop.ServeHTTP(w, r)
	}))
	t.Cleanup(origin.Close)
	fake := turnstiletest.New()
	ts := httptest.NewServer(fake)
	t.Cleanup(ts.Close)

	cfg := config(origin.URL, ts.URL)
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan [2]string, 1)
	done := make(chan error, 1)
	var tlsURL string // set before Started is called
	go func() {
		done <- server.Run(ctx, server.Options{ConfigPath: path, LogOutput: os.Stderr, Started: func(public, admin net.Addr) {
			started <- [2]string{"http://" + public.String(), "http://" + admin.String()}
		}, StartedTLS: func(addr net.Addr) { tlsURL = "https://" + addr.String() }})
	}()
	select {
	case addrs := <-started:
		t.Cleanup(func() { cancel(); <-done })
		t.Cleanup(func() { close(release) }) // first: held requests end before edgeq shuts down
		return &stack{edgeq: addrs[0], admin: addrs[1], tls: tlsURL, configPath: path, fake: fake, originHits: &hits, holds: holds}
	case err := <-done:
		cancel()
		t.Fatalf("edgeq did not start: %v", err)
	}
	return nil
}

// join takes a place as a plain HTTP client and returns its request id.
func (s *stack) join(t *testing.T, queue string, form url.Values) string {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("queue_id", queue)
	resp, err := http.PostForm(s.edgeq+"/_edgeq/assign_queue_pos", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		RequestID string `json:"request_id"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 || body.RequestID == "" {
		t.Fatalf("join %s: %d", queue, resp.StatusCode)
	}
	return body.RequestID
}

// hold takes the queue's only slot: a visitor who is served and keeps its token.
func (s *stack) hold(t *testing.T, queue string, form url.Values) string {
	t.Helper()
	id := s.join(t, queue, form)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.PostForm(s.edgeq+"/_edgeq/generate_token", url.Values{"queue_id": {queue}, "request_id": {id}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			return id
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("holder of %s never served", queue)
	return ""
}

func (s *stack) adminPost(t *testing.T, path string, form url.Values) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.admin+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("admin %s: %d", path, resp.StatusCode)
	}
}

// warm lets visitors through a capacity-1 queue one after another for a few seconds, so edgeq has
// measured a serving rate and shows a real estimated wait.
func (s *stack) warm(t *testing.T, queue string) {
	t.Helper()
	for range 6 {
		id := s.hold(t, queue, nil)
		s.adminPost(t, "/api/queue/update_token_status", url.Values{"queue_id": {queue}, "request_id": {id}, "status": {"1"}})
		time.Sleep(500 * time.Millisecond)
	}
}

func runScenario(t *testing.T, node string, s *stack, scenario string, extra ...string) {
	t.Helper()
	cmd := exec.Command(node, "browser.mjs", scenario)
	cmd.Env = append(os.Environ(), "EDGEQ_URL="+s.edgeq, "EDGEQ_ADMIN_URL="+s.admin, "EDGEQ_ADMIN_KEY="+adminKey)
	cmd.Env = append(cmd.Env, extra...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("scenario %s failed: %v", scenario, err)
	}
}

func TestBrowser(t *testing.T) {
	node := requireBrowser(t)
	s := startStack(t)
	// Screenshots go to a temporary directory, or, with UPDATE_SCREENSHOTS=1 (make screenshots), to
	// docs/screenshots where the README shows them.
	shots := t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		shots, _ = filepath.Abs("../docs/screenshots")
	}

	t.Run("waiting page lands on the shop page when the slot frees", func(t *testing.T) {
		s.warm(t, "drop")
		holder := s.hold(t, "drop", nil)
		runScenario(t, node, s, "waitroom", "HOLDER="+holder)
	})
	t.Run("without JavaScript", func(t *testing.T) {
		holder := s.hold(t, "quiet", nil)
		runScenario(t, node, s, "nojs", "HOLDER="+holder)
	})
	t.Run("through the Turnstile widget", func(t *testing.T) {
		holder := s.hold(t, "club", url.Values{"cf-turnstile-response": {s.fake.Mint("127.0.0.1", "")}})
		runScenario(t, node, s, "turnstile", "HOLDER="+holder, "SCREENSHOT_DIR="+shots)
	})
	t.Run("screenshots in two sizes and two languages", func(t *testing.T) {
		for range 41 {
			s.join(t, "shots", nil)
		}
		for range 4 {
			s.adminPost(t, "/api/queue/increment_serving_position", url.Values{"queue_id": {"shots"}, "increment_by": {"3"}})
			time.Sleep(700 * time.Millisecond)
		}
		runScenario(t, node, s, "screenshots", "SCREENSHOT_DIR="+shots)
		for _, name := range []string{"wait-desktop-en", "wait-desktop-zh-TW", "wait-phone-en", "wait-phone-zh-TW"} {
			if info, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || info.Size() < 5000 {
				t.Fatalf("screenshot %s: %v", name, err)
			}
		}
	})
	t.Run("the shop's cart and checkout through edgeq, with its own script", func(t *testing.T) {
		runScenario(t, node, s, "shop")
	})
	t.Run("the shop's GraphQL add-to-cart through edgeq; its other GraphQL reads keep working", func(t *testing.T) {
		runScenario(t, node, s, "graphqlShop")
	})
	t.Run("a bid through the shop's form, and one refused by edgeq", func(t *testing.T) {
		runScenario(t, node, s, "bid", "SCREENSHOT_DIR="+shots)
	})
	t.Run("one buyer per browser: user visitor refuses a second jersey after a new place, user token sells it", func(t *testing.T) {
		runScenario(t, node, s, "onePerBrowser")
	})
	t.Run("a waiting browser asks the shop for nothing", func(t *testing.T) {
		before := s.originHits.Load()
		runScenario(t, node, s, "still")
		if n := s.originHits.Load() - before; n != 0 {
			t.Fatalf("a browser waiting 30 s made %d requests to the shop", n)
		}
	})
	t.Run("a drop: not open yet, the pre-queue's countdown, the opening, paused, sold out; no overflow", func(t *testing.T) {
		pauseHolder := s.hold(t, "pause", nil)
		before := s.originHits.Load()
		runScenario(t, node, s, "drops", "HOLDER="+pauseHolder, "SCREENSHOT_DIR="+shots)
		t.Logf("the shop saw %d requests during the drop scenario (the served visitor, the last pair)", s.originHits.Load()-before)
		if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
			for _, name := range []string{"drop-notopen-desktop-en", "drop-prequeue-phone-zh-TW", "drop-paused-desktop-en", "drop-soldout-phone-en", "drop-soldout-desktop-en"} {
				if info, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || info.Size() < 5000 {
					t.Fatalf("screenshot %s: %v", name, err)
				}
			}
		}
	})
	t.Run("a presale by invitation: the link lands on the shop once, the dashboard counts it", func(t *testing.T) {
		runScenario(t, node, s, "invite", "SCREENSHOT_DIR="+shots)
	})
	t.Run("markup in titles and return paths stays text", func(t *testing.T) {
		runScenario(t, node, s, "xss")
	})
	t.Run("dead letters retried and dismissed from the dashboard", func(t *testing.T) {
		// Two events the worker gave up on: one well formed (its cause since fixed), one malformed. The
		// admission's record is there, as the reservation wrote it: the worker lists it once applied.
		rdb := redis.NewClient(&redis.Options{Addr: storetest.RedisAddr(t)})
		defer rdb.Close()
		ctx := context.Background()
		admission := ids.New(999).NextString()
		n, _ := strconv.ParseUint(admission, 10, 64)
		at := ids.Time(n)
		if err := rdb.HSet(ctx, fmt.Sprintf("edgeq:{p:jersey}:adm@%d", at.Unix()/86400), admission,
			fmt.Sprintf("admitted dead-letter-user 1 %d", at.UnixMilli())).Err(); err != nil {
			t.Fatal(err)
		}
		plant := func(id, qty string) {
			body, _ := json.Marshal(map[string]any{"id": id, "product_id": "jersey", "stream_id": strings.TrimPrefix(id, "jersey."),
				"fields": map[string]string{"type": "admitted", "admission": admission, "user": "dead-letter-user", "qty": qty, "at": strconv.FormatInt(at.UnixMilli(), 10)},
				"error":  "planted by the e2e test", "failed_at": time.Now().UTC().Format(time.RFC3339)})
			if err := rdb.HSet(ctx, "edgeq:{adm}:dead", id, body).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.ZAdd(ctx, "edgeq:{adm}:dead_by_time", redis.Z{Score: float64(time.Now().UnixMilli()), Member: id})
		}
		plant("jersey.1700000000000-0", "1")
		plant("jersey.1700000000001-0", "many")
		runScenario(t, node, s, "deadletters", "GOOD=jersey.1700000000000-0", "BAD=jersey.1700000000001-0", "ADMISSION="+admission, "SCREENSHOT_DIR="+shots)
	})
	t.Run("the operator dashboard during a sale", func(t *testing.T) {
		stop := s.sale(t, "sale", "jersey")
		defer stop()
		runScenario(t, node, s, "dashboard", "SCREENSHOT_DIR="+shots)
		stop()
		if info, err := os.Stat(filepath.Join(shots, "dashboard.png")); err != nil || info.Size() < 20000 {
			t.Fatalf("dashboard screenshot: %v", err)
		}
	})
	t.Run("the report after a drop, on the admin listener and as a file", func(t *testing.T) {
		s.drop(t, "after", "cap")
		var page bytes.Buffer
		err := server.WriteReport(context.Background(), server.ReportOptions{ConfigPath: s.configPath, Queue: "after"}, &page,
			slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for _, outside := range []string{"<script", "src=", "<link", "@import", "url("} {
			if bytes.Contains(page.Bytes(), []byte(outside)) {
				t.Fatalf("the report file holds %q: it must need nothing from elsewhere", outside)
			}
		}
		file := filepath.Join(t.TempDir(), "report.html")
		if err := os.WriteFile(file, page.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		runScenario(t, node, s, "report", "REPORT_FILE="+file, "SCREENSHOT_DIR="+shots)
		for _, name := range []string{"report.png", "report-phone.png"} {
			if info, err := os.Stat(filepath.Join(shots, name)); err != nil || info.Size() < 20000 {
				t.Fatalf("%s: %v", name, err)
			}
		}
	})
}

// drop plays a short drop on queue for the report: 100 visitors arrive over 20 s; one in ten never
// claims its turn; the others take their token once served, try to buy one unit of product (POST
// /buy/{product}, the shop's answer keeps it), a few try again, and finish a moment later. It returns
// once every visitor is done. For the documentation's screenshots (UPDATE_SCREENSHOTS=1) the drop
// lasts over two minutes, so that its charts have minutes to draw: 120 visitors in a rush, then 100
// more one by one.
func (s *stack) drop(t *testing.T, queue, product string) {
	visitors, gap := 100, func(int) time.Duration { return 200 * time.Millisecond }
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		visitors, gap = 220, func(i int) time.Duration {
			if i < 120 {
				return 80 * time.Millisecond
			}
			return 1200 * time.Millisecond
		}
	}
	t.Helper()
	var wg sync.WaitGroup
	var bought, refused atomic.Int64
	buy := func(buyer string) {
		req, _ := http.NewRequest("POST", s.edgeq+"/buy/"+product, nil)
		req.Header.Set("X-Buyer", buyer)
		req.Header.Set("Accept", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusConflict {
				refused.Add(1)
			} else {
				bought.Add(1)
			}
		}
	}
	for i := range visitors {
		wg.Go(func() {
			resp, err := http.PostForm(s.edgeq+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {queue}})
			if err != nil {
				t.Error(err)
				return
			}
			var joined struct {
				RequestID string `json:"request_id"`
			}
			json.NewDecoder(resp.Body).Decode(&joined)
			resp.Body.Close()
			if i%10 == 7 {
				return // never claims its turn: the place is given up after position_expiry
			}
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				resp, err := http.PostForm(s.edgeq+"/_edgeq/generate_token", url.Values{"queue_id": {queue}, "request_id": {joined.RequestID}})
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					continue
				}
				buy(fmt.Sprintf("drop-buyer-%d", i))
				if i%9 == 0 {
					buy(fmt.Sprintf("drop-buyer-%d", i)) // again: already purchased
				}
				time.Sleep(300 * time.Millisecond)
				s.complete(queue, joined.RequestID)
				return
			}
			t.Errorf("visitor %d of the drop never served", i)
		})
		time.Sleep(gap(i))
	}
	wg.Wait()
	t.Logf("the drop: %d purchases, %d refused", bought.Load(), refused.Load())
	time.Sleep(time.Second) // the replicas' last counts are written
}

// complete ends a visitor's session as the shop's backend does (update_token_status COMPLETED), freeing
// its place.
func (s *stack) complete(queue, requestID string) {
	form := url.Values{"queue_id": {queue}, "request_id": {requestID}, "status": {"1"}}
	req, _ := http.NewRequest("POST", s.admin+"/api/queue/update_token_status", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+adminKey)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// sale simulates a flash sale on queue until stop is called: a visitor joins every 150 ms, waits to
// be served, buys one unit of product (the SKU) with the token through the shop's cart API, and
// finishes (freeing the slot) a moment later.
func (s *stack) sale(t *testing.T, queue, product string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var bought atomic.Int64
	visit := func() {
		defer wg.Done()
		resp, err := http.PostForm(s.edgeq+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {queue}})
		if err != nil {
			return
		}
		var joined struct {
			RequestID string `json:"request_id"`
		}
		json.NewDecoder(resp.Body).Decode(&joined)
		resp.Body.Close()
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		for tok.AccessToken == "" {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			resp, err := http.PostForm(s.edgeq+"/_edgeq/generate_token", url.Values{"queue_id": {queue}, "request_id": {joined.RequestID}})
			if err != nil {
				return
			}
			if resp.StatusCode == 200 {
				json.NewDecoder(resp.Body).Decode(&tok)
			}
			resp.Body.Close()
		}
		if s.buy(ctx, tok.AccessToken, product) {
			bought.Add(1)
		}
		select {
		case <-ctx.Done():
		case <-time.After(700 * time.Millisecond):
		}
		s.complete(queue, joined.RequestID)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(150 * time.Millisecond):
				wg.Add(1)
				go visit()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			t.Logf("simulated sale: %d purchases", bought.Load())
		})
	}
}

// buy is what the shop's page script does, as an API client with an access token: a new cart, the
// SKU added (stock admission), the checkout. It reports whether the order was placed.
func (s *stack) buy(ctx context.Context, token, sku string) bool {
	call := func(path, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.edgeq+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		var created struct {
			Cart struct {
				ID string `json:"id"`
			} `json:"cart"`
		}
		json.NewDecoder(resp.Body).Decode(&created)
		return resp.StatusCode, created.Cart.ID
	}
	status, cart := call("/api/carts", "")
	if status != http.StatusCreated {
		return false
	}
	if status, _ := call("/api/carts/"+cart+"/items", `{"sku": "`+sku+`", "quantity": 1}`); status != http.StatusOK {
		return false
	}
	status, _ = call("/api/carts/"+cart+"/checkout", "{}")
	return status == http.StatusCreated
}
