package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// crowdConfig is what the crowd's flags set.
type crowdConfig struct {
	base, prefix, queue, sku, page string
	size                           int
	poll, browse, pause            time.Duration
	leave                          float64
	seed                           uint64
}

func parseCrowdFlags(args []string) (crowdConfig, error) {
	var c crowdConfig
	fs := flag.NewFlagSet("crowd", flag.ContinueOnError)
	fs.StringVar(&c.base, "url", "http://127.0.0.1:8080", "edgeq's public address")
	fs.StringVar(&c.prefix, "prefix", "/_edgeq", "edgeq's server.prefix")
	fs.StringVar(&c.queue, "queue", "drop", "the queue the shoppers join")
	fs.IntVar(&c.size, "size", 12, "shoppers at once; each comes back as a new one after buying (1..1000)")
	fs.StringVar(&c.sku, "sku", "jersey", "what each shopper buys, one unit: a product the shop has plenty of")
	fs.StringVar(&c.page, "page", "/products/3", "the product page a served shopper looks at")
	fs.DurationVar(&c.poll, "poll", 4*time.Second, "status polls while waiting, ±20 % (as the waiting page)")
	fs.DurationVar(&c.browse, "browse", 5*time.Second, "time on the product page before buying, ±50 %")
	fs.DurationVar(&c.pause, "pause", 3*time.Second, "time between buying and coming back as a new shopper, ±50 %")
	fs.Float64Var(&c.leave, "leave", 0.25, "share of shoppers who leave the line after a poll or two (no-shows)")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.base = strings.TrimRight(c.base, "/")
	if u, err := url.Parse(c.base); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return c, fmt.Errorf("-url %q: want http://host:port", c.base)
	}
	if c.size < 1 || c.size > 1000 || c.poll <= 0 || c.browse < 0 || c.pause < 0 || c.leave < 0 || c.leave > 1 {
		return c, fmt.Errorf("want -size 1..1000, -poll positive, -browse and -pause not negative, -leave 0..1")
	}
	return c, nil
}

// crowdMain runs the crowd until SIGINT or SIGTERM.
func crowdMain(args []string, w io.Writer) error {
	c, err := parseCrowdFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runCrowd(ctx, c, w, &crowdTally{})
}

// crowdTally is what the crowd has done; waiting and inside are now, the others so far.
type crowdTally struct {
	waiting, inside                             atomic.Int64
	served, bought, left, lost, refused, faults atomic.Int64
	home                                        atomic.Bool // the shop ran out of what the crowd buys
}

func (t *crowdTally) String() string {
	home := map[bool]string{true: "; the shop refuses to add more to a cart (sold out?): the crowd has gone home"}[t.home.Load()]
	return fmt.Sprintf("%d waiting, %d inside; so far %d served, %d bought, %d left the line, %d lost their place; %d answers 429/503, %d errors%s",
		t.waiting.Load(), t.inside.Load(), t.served.Load(), t.bought.Load(), t.left.Load(), t.lost.Load(), t.refused.Load(), t.faults.Load(), home)
}

// runCrowd runs c.size shoppers until ctx ends, printing a summary line every 10 s.
func runCrowd(ctx context.Context, c crowdConfig, w io.Writer, tally *crowdTally) error {
	say := func(format string, args ...any) {
		_, _ = fmt.Fprintf(w, "crowd %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	sources, note := crowdSources(c)
	say("%d shoppers in the %s queue at %s, buying %s (%s)", c.size, c.queue, c.base, c.sku, note)
	var wg sync.WaitGroup
	for i := range c.size {
		transport := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second, LocalAddr: sources[i]}).DialContext, IdleConnTimeout: 30 * time.Second}
		s := &shopper{c: c, t: tally, rng: rand.New(rand.NewPCG(c.seed, uint64(i))), client: &http.Client{Transport: transport, Timeout: 30 * time.Second,
			// A redirect is an answer to look at (to the waiting page: not let in), not one to follow.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		wg.Go(func() { s.run(ctx) })
	}
	ticker := time.NewTicker(10 * time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			say("%s", tally)
		case <-ctx.Done():
			wg.Wait()
			say("stopped: %s", tally)
			return nil
		}
	}
}

// crowdSources gives each shopper a loopback address of its own (127.0.0.2, 127.0.0.3, ...) when edgeq
// is on this machine and the system answers on them (Linux does on all of 127/8; macOS on 127.0.0.1
// only). edgeq counts joins and polls per client address (limits:), so a crowd on one address would
// spend the budget of the newcomer's browser on 127.0.0.1 as well, and be refused as a crowd is not.
func crowdSources(c crowdConfig) ([]net.Addr, string) {
	addrs := make([]net.Addr, c.size) // nil: the system's choice
	u, _ := url.Parse(c.base)
	ip := net.ParseIP(u.Hostname()).To4() // 0.0.0.0 (make demo EDGEQ_LISTEN=0.0.0.0:8080) is this machine too
	if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback() && !ip.IsUnspecified()) {
		return addrs, "one client address"
	}
	ln, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		return addrs, "one client address: this system has no 127.0.0.2, so the shoppers share the join and poll limits"
	}
	_ = ln.Close()
	for i := range addrs {
		addrs[i] = &net.TCPAddr{IP: net.IPv4(127, 0, byte((i+2)>>8), byte(i+2))}
	}
	return addrs, fmt.Sprintf("one client address each, 127.0.0.2 to %s", addrs[c.size-1].(*net.TCPAddr).IP)
}

// shopper is one place in the crowd: a run of visitors, each with a new cookie jar.
type shopper struct {
	c      crowdConfig
	t      *crowdTally
	rng    *rand.Rand
	client *http.Client // with the visitor's cookie jar
	// penalty delays the next visitor after failures (1 s, doubling to a minute; 0 after an answer as
	// wanted), so that a broken edgeq or shop is not hammered.
	penalty time.Duration
}

func (s *shopper) run(ctx context.Context) {
	// Arrivals spread over the first poll period: a crowd does not come in one instant.
	sleepCtx(ctx, time.Duration(s.rng.Float64()*float64(s.c.poll)))
	for ctx.Err() == nil && !s.t.home.Load() {
		s.visit(ctx)
		sleepCtx(ctx, s.around(s.c.pause, 0.5)+s.penalty)
	}
}

// visit is one visitor from joining to the order: join, wait and take the token, look, buy.
func (s *shopper) visit(ctx context.Context) {
	s.client.Jar, _ = cookiejar.New(nil) // a new visitor: cookies of its own
	var joined map[string]string         // {"request_id": ...}
	join := map[string]string{"queue_id": s.c.queue}
	if !s.expect(ctx, "POST", s.c.prefix+"/assign_queue_pos", join, &joined, http.StatusOK) || !s.wait(ctx, joined["request_id"]) {
		return
	}
	s.t.served.Add(1)
	s.t.inside.Add(1)
	defer s.t.inside.Add(-1)
	if s.expect(ctx, "GET", s.c.page, nil, nil, http.StatusOK) && sleepCtx(ctx, s.around(s.c.browse, 0.5)) {
		s.buy(ctx)
	}
}

// wait polls the place's status as the waiting page does and, once served, takes the token; false
// when the visitor left (a no-show: it stops polling, its place stays in the line) or the place ended.
func (s *shopper) wait(ctx context.Context, id string) bool {
	s.t.waiting.Add(1)
	defer s.t.waiting.Add(-1)
	leaving, leaveAfter := s.rng.Float64() < s.c.leave, 1+s.rng.IntN(2) // a no-show polls once or twice
	statusPath := s.c.prefix + "/status/" + url.PathEscape(s.c.queue) + "/" + url.PathEscape(id)
	delay := s.around(min(s.c.poll, 2*time.Second), 0.2) // the page's first look comes sooner
	for polls := 0; ; polls++ {
		if leaving && polls == leaveAfter {
			s.t.left.Add(1)
			return false
		}
		if !sleepCtx(ctx, delay) {
			return false
		}
		delay = s.around(s.c.poll, 0.2)
		var status map[string]any
		if !s.expect(ctx, "GET", statusPath, nil, &status, http.StatusOK) {
			return false
		}
		switch status["queue_status"] {
		case "sold_out": // the drop's page stops polling; so does a shopper
			s.t.lost.Add(1)
			return false
		case "served": // its turn: the token, as the page takes it
			form := map[string]string{"queue_id": s.c.queue, "request_id": id}
			return s.expect(ctx, "POST", s.c.prefix+"/generate_token", form, nil, http.StatusOK)
		}
	}
}

// buy puts one unit of c.sku in a new cart and checks out, as the shop's page script does. The
// checkout's 2xx completes the visit (the route's complete_on), which frees the place at once.
func (s *shopper) buy(ctx context.Context) {
	var created struct{ Cart struct{ ID string } } // {"cart": {"id": ...}}
	if !s.expect(ctx, "POST", "/api/carts", nil, &created, http.StatusCreated) {
		return
	}
	cart := "/api/carts/" + url.PathEscape(created.Cart.ID)
	item := map[string]any{"sku": s.c.sku, "quantity": 1}
	if s.expect(ctx, "POST", cart+"/items", item, nil, http.StatusOK) && s.expect(ctx, "POST", cart+"/checkout", map[string]any{}, nil, http.StatusCreated) {
		s.t.bought.Add(1)
	}
}

// expect sends a request (body, when not nil, as JSON) and reports whether the answer had status
// want, decoding its JSON into out. Another answer is counted: a lost place when edgeq says the place
// is over or not let in (403, 410, a redirect to the waiting page); the shop's 409 on adding as the
// product sold out, which sends the crowd home; anything else as an error.
func (s *shopper) expect(ctx context.Context, method, path string, body, out any, want int) bool {
	status, data, err := s.send(ctx, method, path, body)
	s.penalty = min(time.Minute, max(time.Second, 2*s.penalty))
	switch {
	case err != nil:
	case status == want:
		s.penalty = 0
		return out == nil || json.Unmarshal(data, out) == nil
	case status == http.StatusForbidden || status == http.StatusGone || status == http.StatusFound:
		s.t.lost.Add(1)
	case status == http.StatusConflict && strings.HasSuffix(path, "/items"):
		s.t.home.Store(true)
	default:
		s.t.faults.Add(1)
	}
	return false
}

// send makes one request as a polite client: 429 and 503 are waited out (Retry-After, else 5 s) and
// failed connections backed off (1 s, doubling to 30 s), for up to six tries; other answers return.
func (s *shopper) send(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var payload []byte
	if body != nil {
		payload, _ = json.Marshal(body)
	}
	backoff := time.Second
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(ctx, method, s.c.base+path, bytes.NewReader(payload))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Accept", "application/json")
		if path == s.c.page {
			req.Header.Set("Accept", "text/html") // a page, asked for as a browser asks
		} else if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		var wait time.Duration
		resp, err := s.client.Do(req)
		if err == nil {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
				return resp.StatusCode, data, nil
			}
			s.t.refused.Add(1)
			wait = retryAfter(resp.Header.Get("Retry-After"))
		} else if ctx.Err() == nil {
			s.t.faults.Add(1)
			wait, backoff = backoff, min(2*backoff, 30*time.Second)
		}
		if try == 6 || !sleepCtx(ctx, s.around(wait, 0.2)) {
			return 0, nil, fmt.Errorf("%s %s: gave up (%v, %v)", method, path, err, ctx.Err())
		}
	}
}

// around is d give or take frac of it, so that shoppers do not move in step.
func (s *shopper) around(d time.Duration, frac float64) time.Duration {
	return time.Duration(float64(d) * (1 - frac + 2*frac*s.rng.Float64()))
}

// retryAfter reads Retry-After in seconds (as edgeq sends it), 5 s when absent or unreadable.
func retryAfter(value string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(value)); err == nil && n > 0 {
		return time.Duration(min(n, 300)) * time.Second
	}
	return 5 * time.Second
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	return ctx.Err() == nil
}
