package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// nemesisRun breaks the chaos run's parts at random, one thing at a time, and remembers what it did.
type nemesisRun struct {
	run        *chaosRun
	rng        *rand.Rand
	start      time.Time
	onlyPauses bool

	mu      sync.Mutex
	history []nemesisEvent
	pending sync.WaitGroup // heals still to come (a stopped replica's SIGCONT, a link's restore)
	// failedOver: the Redis master was killed once (the topology restarts its original master only).
	failedOver bool
}

// nemesisEvent is one thing the nemesis did.
type nemesisEvent struct {
	at     time.Duration
	action string
}

func (n *nemesisRun) note(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.history = append(n.history, nemesisEvent{at: time.Since(n.start).Round(10 * time.Millisecond), action: fmt.Sprintf(format, args...)})
}

// between is a random duration in [lo, hi).
func (n *nemesisRun) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

// loop acts every few seconds until ctx ends.
func (n *nemesisRun) loop(ctx context.Context) {
	for {
		wait := n.between(2*time.Second, 5*time.Second)
		if n.onlyPauses {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if n.onlyPauses {
			// Longer than the lease, its margin and a sweep: the other replicas give back what it
			// holds, with purchases waiting in its hold line: a slow shop fills the line (at the
			// shop's usual pace the buyers rarely do), and the stop waits until it is full.
			n.slowShop(3 * time.Second)
			n.waitLineFull(ctx, 0, 3*time.Second)
			n.pause(ctx, 0, n.between(28*time.Second, 32*time.Second))
			continue
		}
		r := n.rng.IntN(len(n.run.replicas))
		switch k := n.rng.IntN(10); {
		case k < 3:
			n.pause(ctx, r, n.between(2*time.Second, 25*time.Second))
		case k < 5:
			n.killAndRestart(r, n.between(500*time.Millisecond, 3*time.Second))
		case k < 7:
			n.cut(r, n.between(time.Second, 4*time.Second))
		case k < 9:
			n.slowShop(n.between(2*time.Second, 6*time.Second))
		default:
			n.failover()
		}
	}
}

// waitLineFull waits (up to limit) until the checkout route's max_in_flight purchases are at the
// shop (a limit across the replicas: the sum of their gauges), so the next ones replica r takes wait
// in its hold line.
func (n *nemesisRun) waitLineFull(ctx context.Context, r int, limit time.Duration) {
	prefix := fmt.Sprintf("edgeq_route_in_flight{route=%q} ", "checkout")
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		total := 0.0
		for _, rep := range n.run.replicas {
			resp, err := http.Get("http://" + rep.admin + "/metrics")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			for line := range strings.SplitSeq(string(body), "\n") {
				if v, ok := strings.CutPrefix(line, prefix); ok {
					f, _ := strconv.ParseFloat(v, 64)
					total += f
				}
			}
		}
		if total >= chaosMaxInFlight {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.note("the hold lines did not fill in %s", limit)
}

// pause stops replica r (SIGSTOP) for d, waiting through it: one stop at a time.
func (n *nemesisRun) pause(ctx context.Context, r int, d time.Duration) {
	rep := n.run.replicas[r]
	if !rep.signal(syscall.SIGSTOP) {
		return
	}
	n.note("SIGSTOP replica %d for %s", r, d.Round(time.Millisecond))
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	rep.signal(syscall.SIGCONT)
	n.note("SIGCONT replica %d", r)
}

// killAndRestart kills replica r (SIGKILL) and starts it again after d.
func (n *nemesisRun) killAndRestart(r int, d time.Duration) {
	rep := n.run.replicas[r]
	if !rep.kill() {
		return
	}
	n.note("SIGKILL replica %d, restarted after %s", r, d.Round(time.Millisecond))
	time.Sleep(d)
	if err := rep.start(); err != nil {
		n.note("replica %d did not restart: %v", r, err)
	}
}

// cut cuts replica r's link to the shop for d (what is on its way is held, then delivered).
func (n *nemesisRun) cut(r int, d time.Duration) {
	link := n.run.replicas[r].link
	link.Cut()
	n.note("cut replica %d's link to the shop for %s", r, d.Round(time.Millisecond))
	n.pending.Go(func() {
		time.Sleep(d)
		link.Restore()
	})
}

// slowShop makes the shop answer past origin.timeout for d (placing every order all the same).
func (n *nemesisRun) slowShop(d time.Duration) {
	n.run.shop.slow.Store(true)
	n.note("the shop answers past origin.timeout for %s", d.Round(time.Millisecond))
	n.pending.Go(func() {
		time.Sleep(d)
		n.run.shop.slow.Store(false)
	})
}

// failover kills the Redis master once, waits for Sentinel's failover, and restarts the old master as
// a replica.
func (n *nemesisRun) failover() {
	if n.failedOver {
		return
	}
	n.failedOver = true
	from, err := n.run.top.KillMaster()
	if err != nil {
		n.note("killing the Redis master failed: %v", err)
		return
	}
	n.note("killed the Redis master %s", from)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	to, err := n.run.top.WaitFailover(ctx, from)
	if err != nil {
		n.note("no failover: %v", err)
		return
	}
	n.note("Sentinel promoted %s", to)
	if err := n.run.top.RestartOldMaster(); err != nil {
		n.note("the old master did not come back: %v", err)
		return
	}
	n.note("the old master %s is a replica again", from)
}

// heal ends what is still broken: every link restored, the shop at its pace, every replica running.
func (n *nemesisRun) heal() {
	n.pending.Wait()
	for i, r := range n.run.replicas {
		r.signal(syscall.SIGCONT)
		r.link.Restore()
		r.mu.Lock()
		down := r.down
		r.mu.Unlock()
		if down {
			if err := r.start(); err != nil {
				n.note("replica %d did not restart at the end: %v", i, err)
			}
		}
	}
	n.run.shop.slow.Store(false)
	n.note("healed: every replica running, every link up, the shop at its pace")
}
