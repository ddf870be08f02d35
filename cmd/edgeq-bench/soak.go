package main

// `edgeq-bench soak`: admissions and joins at a steady rate for a long run with a short
// admission.records_retention (bytes.go has the stack both share).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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
	_, _ = fmt.Fprintf(w, "soak: %s, %d admissions/s (%s) and %d joins/s on one edgeq, records_retention %s\n", *duration, *rate, population, *joins, *retention)
	_, _ = fmt.Fprintf(w, "%6s %9s %8s %8s %6s %9s %9s %13s %7s\n", "minute", "redis MB", "RSS MB", "heap MB", "keys", "adm p99", "join p99", "redis µs/req", "errors")
	var admP99, joinP99 []time.Duration
	for i := range len(samples) - 1 {
		m := minutes[i]
		s := samples[i+1]
		admP99, joinP99 = append(admP99, m.buys.p99()), append(joinP99, m.joins.p99())
		perReq := (s.cpu - samples[i].cpu) * 1e6 / float64(max(m.buys.n+m.joins.n, 1))
		_, _ = fmt.Fprintf(w, "%6d %9.1f %8.1f %8.1f %6d %9s %9s %13.1f %7d\n", i+1, float64(s.redis)/1e6, float64(s.rss)/1e6, float64(s.heap)/1e6, s.keys,
			admP99[i].Round(100*time.Microsecond), joinP99[i].Round(100*time.Microsecond), perReq, m.errs)
	}
	if k := len(admP99); k >= 3 {
		_, _ = fmt.Fprintf(w, "p99 of the last minute over the second's: admissions %.2fx, joins %.2fx\n",
			float64(admP99[k-1])/float64(admP99[1]), float64(joinP99[k-1])/float64(max(joinP99[1], 1)))
		settle := min(int((*retention+2*time.Minute)/time.Minute), len(samples)-2)
		first, last := samples[settle], samples[len(samples)-1]
		_, _ = fmt.Fprintf(w, "from minute %d (the retention and two minutes) to the end: redis %+.1f MB, RSS %+.1f MB, live heap %+.1f MB\n",
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
		_, _ = fmt.Fprintf(w, "the largest keys at the end:\n")
		for _, k := range sizes[:min(len(sizes), 8)] {
			_, _ = fmt.Fprintf(w, "  %-48s %11d\n", k.key, k.bytes)
		}
	}
	_, _ = fmt.Fprintf(w, "Redis commands of 10 ms or more: %d\n", len(slow))
	for name, t := range by {
		_, _ = fmt.Fprintf(w, "  %-20s %5d  longest %s, mean %s, first in minute %d\n", name, t.n, t.longest, t.sum/time.Duration(t.n), t.firstMin)
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
