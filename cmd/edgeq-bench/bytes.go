package main

// What the store keeps per admission, and whether it stays bounded over time.
//
// `edgeq-bench bytes` sends admissions of one product (per_user_limit 1, a new buyer each, the ledger
// off) through an edgeq on a private redis-server, lets the event worker and the commits settle
// everything, and prints Redis's used_memory growth per admission (INFO memory before and after),
// with the product's keys by size.
//
// `edgeq-bench soak` holds admissions and joins at a steady rate for a long run with a short
// admission.records_retention, and prints per minute Redis's memory, this process's RSS and live heap
// (edgeq runs in it), Redis's CPU per request and the p99 of each, then Redis's slow commands: the
// store must stop growing once the retention is reached, and the p99s stay where they were.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store/redisserver"
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
		stop: func() { stop(); rdb.Close(); srv.Stop() }}, nil
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
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
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
	fmt.Fprintf(w, "bytes of Redis per admission (per_user_limit 1, a new buyer each, ledger off; %d admissions after %d, %.0f/s)\n",
		*n, *warm, float64(*n)/took.Seconds())
	fmt.Fprintf(w, "  used_memory %d -> %d: %.0f B per admission\n", before, after, float64(after-before)/float64(*n))
	fmt.Fprintf(w, "  keys %d; the largest, by MEMORY USAGE (bytes per admission of all %d):\n", len(sizes), total)
	for _, k := range sizes[:min(len(sizes), 12)] {
		fmt.Fprintf(w, "    %-48s %11d  %6.1f\n", k.key, k.bytes, float64(k.bytes)/float64(total))
	}
	return nil
}

func soakBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	duration := fs.Duration("duration", 20*time.Minute, "how long the load runs")
	retention := fs.Duration("retention", 3*time.Minute, "admission.records_retention")
	rate := fs.Int("rate", 600, "admissions per second")
	joins := fs.Int("joins", 100, "queue joins per second")
	buyers := fs.Int("buyers", 50_000, "the buyers, each buying again and again (per_user_limit: unbounded); 0: a new buyer each admission (per_user_limit 1: the buyer counts grow, as they stay with their product)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration < 2*time.Minute || *rate < 1 || *joins < 0 || *retention < time.Minute || *buyers < 0 {
		return errors.New("duration at least 2m, retention at least 1m, rate positive, joins and buyers not negative")
	}
	perUser := 1
	if *buyers > 0 {
		perUser = 1_000_000
	}
	b, err := startBytesStack(*retention, perUser)
	if err != nil {
		return fmt.Errorf("the soak %w", err)
	}
	defer b.stop()
	// Redis's slow log keeps every command of 10 ms or more: what held the server, when the p99s rise.
	ctx := context.Background()
	if err := b.rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err(); err != nil {
		return err
	}
	b.rdb.ConfigSet(ctx, "slowlog-max-len", "10000")
	b.rdb.SlowLogReset(ctx)

	type minute struct {
		buys, joins latencies
		errs        int
	}
	var mu sync.Mutex
	minutes := make([]minute, int(*duration/time.Minute)+1)
	record := func(i int, join bool, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		m := &minutes[min(i, len(minutes)-1)]
		switch {
		case err != nil:
			m.errs++
		case join:
			m.joins.add(d)
		default:
			m.buys.add(d)
		}
	}
	start := time.Now()
	slots := make(chan struct{}, 512) // requests in flight at most: a stall shows as latency, not as goroutines
	var wg sync.WaitGroup
	var buyer atomic.Int64
	fire := func(join bool) {
		select {
		case slots <- struct{}{}:
		default:
			record(int(time.Since(start)/time.Minute), join, 0, errors.New("too many in flight"))
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			i := int(time.Since(start) / time.Minute)
			var d time.Duration
			var err error
			if join {
				d, err = b.join()
			} else {
				n := buyer.Add(1)
				if *buyers > 0 {
					n %= int64(*buyers)
				}
				d, err = b.buy("soak-" + strconv.FormatInt(n, 10))
			}
			record(i, join, d, err)
		})
	}
	type sample struct {
		redis, rss int64
		heap       uint64 // this process's live heap after a collection
		keys       int64
		cpu        float64 // Redis's CPU seconds so far (user and system)
	}
	var samples []sample
	take := func() {
		used, _ := usedMemory(b.rdb)
		keys, _ := b.rdb.DBSize(context.Background()).Result()
		var cpu float64
		for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
			v, _ := infoField(b.rdb, "cpu", f)
			n, _ := strconv.ParseFloat(v, 64)
			cpu += n
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		samples = append(samples, sample{used, selfRSS(), ms.HeapAlloc, keys, cpu})
	}
	take()
	const tick = 10 * time.Millisecond
	perTick := float64(*rate) * tick.Seconds()
	joinsPerTick := float64(*joins) * tick.Seconds()
	var owedBuys, owedJoins float64
	ticker := time.NewTicker(tick)
	nextSample := start.Add(time.Minute)
	for now := range ticker.C {
		if now.Sub(start) >= *duration {
			break
		}
		for owedBuys += perTick; owedBuys >= 1; owedBuys-- {
			fire(false)
		}
		for owedJoins += joinsPerTick; owedJoins >= 1; owedJoins-- {
			fire(true)
		}
		if now.After(nextSample) {
			take()
			nextSample = nextSample.Add(time.Minute)
		}
	}
	ticker.Stop()
	wg.Wait()
	population := "a new buyer each"
	if *buyers > 0 {
		population = fmt.Sprintf("%d buyers buying again and again", *buyers)
	}
	fmt.Fprintf(w, "soak: %s, %d admissions/s (%s) and %d joins/s on one edgeq, records_retention %s\n", *duration, *rate, population, *joins, *retention)
	fmt.Fprintf(w, "%6s %9s %8s %8s %6s %9s %9s %13s %7s\n", "minute", "redis MB", "RSS MB", "heap MB", "keys", "adm p99", "join p99", "redis µs/req", "errors")
	var admP99, joinP99 []time.Duration
	for i := range len(samples) - 1 {
		m := minutes[i]
		s := samples[i+1]
		admP99, joinP99 = append(admP99, m.buys.p99()), append(joinP99, m.joins.p99())
		perReq := (s.cpu - samples[i].cpu) * 1e6 / float64(max(m.buys.n+m.joins.n, 1))
		fmt.Fprintf(w, "%6d %9.1f %8.1f %8.1f %6d %9s %9s %13.1f %7d\n", i+1, float64(s.redis)/1e6, float64(s.rss)/1e6, float64(s.heap)/1e6, s.keys,
			admP99[i].Round(100*time.Microsecond), joinP99[i].Round(100*time.Microsecond), perReq, m.errs)
	}
	if k := len(admP99); k >= 3 {
		fmt.Fprintf(w, "p99 of the last minute over the second's: admissions %.2fx, joins %.2fx\n",
			float64(admP99[k-1])/float64(admP99[1]), float64(joinP99[k-1])/float64(max(joinP99[1], 1)))
		settle := min(int((*retention+2*time.Minute)/time.Minute), len(samples)-2)
		first, last := samples[settle], samples[len(samples)-1]
		fmt.Fprintf(w, "from minute %d (the retention and two minutes) to the end: redis %+.1f MB, RSS %+.1f MB, live heap %+.1f MB\n",
			settle, float64(last.redis-first.redis)/1e6, float64(last.rss-first.rss)/1e6, (float64(last.heap)-float64(first.heap))/1e6)
	}
	slow, err := b.rdb.SlowLogGet(ctx, 10000).Result()
	if err != nil {
		return err
	}
	type tally struct {
		n        int
		longest  time.Duration
		sum      time.Duration
		firstMin int
	}
	by := map[string]*tally{}
	for _, e := range slow {
		name := strings.ToLower(e.Args[0])
		if name == "evalsha" && len(e.Args) > 1 {
			name += " " + e.Args[1][:8]
		}
		t := by[name]
		if t == nil {
			t = &tally{firstMin: 1 << 30}
			by[name] = t
		}
		t.n++
		t.sum += e.Duration
		t.longest = max(t.longest, e.Duration)
		t.firstMin = min(t.firstMin, int(e.Time.Sub(start)/time.Minute)+1)
	}
	if sizes, err := keySizes(b.rdb); err == nil {
		fmt.Fprintf(w, "the largest keys at the end:\n")
		for _, k := range sizes[:min(len(sizes), 8)] {
			fmt.Fprintf(w, "  %-48s %11d\n", k.key, k.bytes)
		}
	}
	fmt.Fprintf(w, "Redis commands of 10 ms or more: %d\n", len(slow))
	for name, t := range by {
		fmt.Fprintf(w, "  %-20s %5d  longest %s, mean %s, first in minute %d\n", name, t.n, t.longest, t.sum/time.Duration(t.n), t.firstMin)
	}
	return nil
}

// latencies is a histogram of durations: 1 µs to about 100 s in buckets 5 % wide, so a minute of a
// long run takes the same memory whatever its number of requests.
type latencies struct {
	counts [400]int
	n      int
}

func bucketOf(d time.Duration) int {
	return min(max(int(math.Log(float64(max(d.Microseconds(), 1)))/math.Log(1.05)), 0), 399)
}

func (l *latencies) add(d time.Duration) {
	l.counts[bucketOf(d)]++
	l.n++
}

// p99 is the upper bound of the bucket holding the 99th percentile.
func (l *latencies) p99() time.Duration {
	want, seen := l.n-l.n/100, 0
	for i, c := range l.counts {
		if seen += c; seen >= want && l.n > 0 {
			return time.Duration(math.Pow(1.05, float64(i+1))) * time.Microsecond
		}
	}
	return 0
}

// selfRSS is this process's resident set size (bytes), 0 when /proc cannot tell.
func selfRSS() int64 {
	text, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
