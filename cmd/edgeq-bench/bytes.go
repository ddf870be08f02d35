package main

// What the store keeps per admission, and whether it stays bounded over time.
//
// `edgeq-bench bytes` sends admissions of one product (per_user_limit 1, a new buyer each, the ledger
// off) through an edgeq on a private redis-server, lets the event worker and the commits settle
// everything, and prints Redis's used_memory growth per admission (INFO memory before and after),
// with the product's keys by size.
//
// `edgeq-bench soak` (soak.go) holds admissions and joins at a steady rate for a long run with a short
// admission.records_retention, and prints per minute Redis's memory, this process's RSS and live heap
// (edgeq runs in it), Redis's CPU per request and the p99 of each, then Redis's slow commands: the
// store must stop growing once the retention is reached, and the p99s stay where they were.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/testutil/redisserver"
)

// bytesConfig is the edgeq of both: one product, its checkout, a queue that admits nobody (joins
// only take places), no per-address limits.
func bytesConfig(retention time.Duration, perUser int) string {
	return fmt.Sprintf(`
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
admission: {records_retention: %s}
products:
  - {id: hot, stock: 1000000000, per_user_limit: %d, name: "Hot item"}
queues:
  - {id: soak, capacity: 0}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    admission: {type: stock, product: "path:product", user: "header:X-User"}
`, retention, perUser)
}

// bytesStack is a redis-server and an edgeq on it.
type bytesStack struct {
	edge   string
	rdb    *redis.Client
	client *http.Client
	stop   func()
}

func startBytesStack(retention time.Duration, perUser int) (*bytesStack, error) {
	srv, err := redisserver.Start()
	if err != nil {
		return nil, fmt.Errorf("needs redis-server: %w", err)
	}
	origin, err := serve(http.HandlerFunc(tableOrigin))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	edge, _, stop, err := startEdgeqAdmin(origin, srv.Addr(), bytesConfig(retention, perUser))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	tr := &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}
	return &bytesStack{edge: edge, rdb: rdb, client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		stop: func() { stop(); _ = rdb.Close(); srv.Stop() }}, nil
}

// buy sends one admission of a new buyer and returns how long it took.
func (b *bytesStack) buy(user string) (time.Duration, error) {
	req, _ := http.NewRequest("POST", b.edge+"/checkout/hot", strings.NewReader("quantity=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-User", user)
	return b.send(req)
}

// join takes a place in the queue.
func (b *bytesStack) join() (time.Duration, error) {
	req, _ := http.NewRequest("POST", b.edge+"/_edgeq/assign_queue_pos", strings.NewReader(url.Values{"queue_id": {"soak"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.send(req)
}

func (b *bytesStack) send(req *http.Request) (time.Duration, error) {
	start := time.Now()
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	return time.Since(start), nil
}

// buyMany sends n admissions of new buyers (named from first on) from conns clients.
func (b *bytesStack) buyMany(first, n, conns int) error {
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for failed.Load() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := b.buy("buyer-" + strconv.Itoa(first+int(i))); err != nil {
					failed.Store(&err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// settled waits until the worker has applied every event and no admission is unsettled.
func (b *bytesStack) settled() error {
	if _, err := drained(b.rdb, 5*time.Minute, productStreams("edgeq", "hot")...); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		n, err := b.rdb.ZCard(context.Background(), "edgeq:{p:hot}:unsettled").Result()
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d admissions still unsettled after a minute", n)
		}
	}
}

// keySize is a key and what MEMORY USAGE says of it.
type keySize struct {
	key   string
	bytes int64
}

// keySizes lists every key by MEMORY USAGE (sampling every element), largest first.
func keySizes(rdb *redis.Client) ([]keySize, error) {
	ctx := context.Background()
	var out []keySize
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, keySize{iter.Val(), n})
	}
	slices.SortFunc(out, func(a, b keySize) int { return int(b.bytes - a.bytes) })
	return out, iter.Err()
}

func bytesBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("bytes", flag.ContinueOnError)
	n := fs.Int("admissions", 200_000, "admissions measured (each a new buyer)")
	warm := fs.Int("warmup", 20_000, "admissions before the measurement (the keys made once)")
	conns := fs.Int("connections", 32, "concurrent clients")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *warm < 0 || *conns < 1 {
		return errors.New("admissions and connections must be positive, warmup not negative")
	}
	b, err := startBytesStack(7*24*time.Hour, 1)
	if err != nil {
		return fmt.Errorf("the bytes benchmark %w", err)
	}
	defer b.stop()
	if err := b.buyMany(0, *warm, *conns); err != nil {
		return err
	}
	if err := b.settled(); err != nil {
		return err
	}
	before, err := usedMemory(b.rdb)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := b.buyMany(*warm, *n, *conns); err != nil {
		return err
	}
	took := time.Since(start)
	if err := b.settled(); err != nil {
		return err
	}
	after, err := usedMemory(b.rdb)
	if err != nil {
		return err
	}
	sizes, err := keySizes(b.rdb)
	if err != nil {
		return err
	}
	total := int64(*warm + *n)
	_, _ = fmt.Fprintf(w, "bytes of Redis per admission (per_user_limit 1, a new buyer each, ledger off; %d admissions after %d, %.0f/s)\n",
		*n, *warm, float64(*n)/took.Seconds())
	_, _ = fmt.Fprintf(w, "  used_memory %d -> %d: %.0f B per admission\n", before, after, float64(after-before)/float64(*n))
	_, _ = fmt.Fprintf(w, "  keys %d; the largest, by MEMORY USAGE (bytes per admission of all %d):\n", len(sizes), total)
	for _, k := range sizes[:min(len(sizes), 12)] {
		_, _ = fmt.Fprintf(w, "    %-48s %11d  %6.1f\n", k.key, k.bytes, float64(k.bytes)/float64(total))
	}
	return nil
}
