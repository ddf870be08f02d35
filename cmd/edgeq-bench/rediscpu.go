package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCPU is the CPU time a redis-server spent on commands (INFO commandstats), per command, and
// the operations it was spent on: Redis is one shared core for every replica, so its CPU per
// operation is what caps a sale.
type redisCPU struct {
	usec    map[string]int64
	calls   map[string]int64
	process float64 // seconds of CPU of the redis-server process (INFO cpu: user + sys)
	ops     int64
}

func readRedisCPU(c *redis.Client) (redisCPU, error) {
	text, err := c.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		return redisCPU{}, err
	}
	r := redisCPU{usec: map[string]int64{}, calls: map[string]int64{}}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			n, _ := strconv.ParseFloat(v, 64)
			r.process += n
		}
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for _, field := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "usec":
				r.usec[name] = int64(n)
			case "calls":
				r.calls[name] = int64(n)
			}
		}
	}
	return r, nil
}

func (r redisCPU) minus(o redisCPU) redisCPU {
	d := redisCPU{usec: map[string]int64{}, calls: map[string]int64{}, process: r.process - o.process}
	for k, v := range r.usec {
		d.usec[k] = v - o.usec[k]
		d.calls[k] = r.calls[k] - o.calls[k]
	}
	return d
}

func (r *redisCPU) add(o redisCPU, ops int64) {
	if r.usec == nil {
		r.usec, r.calls = map[string]int64{}, map[string]int64{}
	}
	for k, v := range o.usec {
		r.usec[k] += v
		r.calls[k] += o.calls[k]
	}
	r.process += o.process
	r.ops += ops
}

// perOp is the redis-server process's CPU per operation, in µs: commands, scripts, the network and
// everything else it did meanwhile.
func (r redisCPU) perOp() float64 {
	if r.ops == 0 {
		return 0
	}
	return r.process * 1e6 / float64(r.ops)
}

// breakdown lists the commands by CPU, per operation. A script's time includes the commands it calls,
// which Redis also counts under their own names.
func (r redisCPU) breakdown() string {
	names := make([]string, 0, len(r.usec))
	for k, v := range r.usec {
		if v > 0 {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return int(r.usec[b] - r.usec[a]) })
	var b strings.Builder
	for _, k := range names {
		if r.ops > 0 {
			fmt.Fprintf(&b, "  %-14s %6.2f calls, %6.1f µs\n", k, float64(r.calls[k])/float64(r.ops), float64(r.usec[k])/float64(r.ops))
		}
	}
	return b.String()
}

// drained waits until every consumer group of each stream has read and acknowledged everything, and
// returns how long that took (a product's admissions go to two streams: events and admits).
func drained(c *redis.Client, limit time.Duration, streams ...string) (time.Duration, error) {
	start := time.Now()
	for _, stream := range streams {
		for {
			if time.Since(start) >= limit {
				return limit, fmt.Errorf("the event worker did not catch up with %s within %s", stream, limit)
			}
			groups, err := c.XInfoGroups(context.Background(), stream).Result()
			if err != nil {
				return 0, err
			}
			done := len(groups) > 0
			for _, g := range groups {
				if g.Lag < 0 {
					return 0, fmt.Errorf("%s: group %s lost entries (trimmed by the stream's length bound before it read them)", stream, g.Name)
				}
				done = done && g.Lag == 0 && g.Pending == 0
			}
			if done {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return time.Since(start), nil
}

// productStreams are a product's two event streams under an edgeq key prefix.
func productStreams(prefix, product string) []string {
	return []string{fmt.Sprintf("%s:{p:%s}:events", prefix, product), fmt.Sprintf("%s:{p:%s}:admits", prefix, product)}
}
