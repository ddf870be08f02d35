package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Writes the replicas confirm (redis.wait_replicas): a script's calls, or a pipeline of writes, with
// a WAIT after them on the same connection of the master that holds their keys.

// RunAcked runs script on the master that holds keys[0], and with redis.wait_replicas > 0 sends WAIT in
// the same pipeline, on the same connection, right after it. It returns the script's reply; the error
// is the script's own (a store that did not answer: the script may have run) or ErrNotAcked (the
// script ran and answered, and its reply is in cmd, but the replicas did not confirm it in time).
//
// A master that refuses writes for want of replicas (min-replicas-to-write: NOREPLICAS) wrote nothing
// and answered: that is ErrNotAcked too, with the script's error in cmd. The call, WAIT included, is
// bounded by CallTimeout.
func (s *Store) RunAcked(ctx context.Context, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	cmds, errs := s.RunAckedAll(ctx, script, []Call{{Keys: keys, Args: args}})
	return cmds[0], errs[0]
}

// CallTimeout bounds one call made on a visitor's behalf, the client's retries included: 2 s (a read
// timeout and a retry), plus redis.wait_timeout while WAITs are on. A store that has not answered by
// then counts as unavailable for that call (fail fast: the request is refused 503 and what the call
// may have done is given back), however long the link stays silent. Zero for the embedded store, which
// has no network to fail on and queues a burst instead.
func (s *Store) CallTimeout() time.Duration {
	if s.embedded != nil {
		return 0
	}
	d := 2 * time.Second
	if w := s.repl.wait.Load(); w.n > 0 {
		d += w.timeout
	}
	return d
}

// Bound returns ctx bounded by CallTimeout (or by ctx's own deadline when that comes first).
func (s *Store) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.CallTimeout()
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// Call is one call of a script: its KEYS and ARGV.
type Call struct {
	Keys []string
	Args []any
}

// RunAckedAll is RunAcked for many calls of one script at once: the calls to each master go in one
// pipeline, in order, and with redis.wait_replicas > 0 one WAIT after them covers them all (the
// replication stream is ordered). errs[i] is what RunAcked would have returned for calls[i]; a
// pipeline that got no answer fails every call in it. One round trip per master instead of one per
// call: on a busy Redis a round trip costs about as much CPU as a script's own work.
func (s *Store) RunAckedAll(ctx context.Context, script *redis.Script, calls []Call) (cmds []*redis.Cmd, errs []error) {
	cmds, errs = make([]*redis.Cmd, len(calls)), make([]error, len(calls))
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	w := s.repl.wait.Load()
	cluster, isCluster := s.Client.(*redis.ClusterClient)
	if !isCluster || w.n <= 0 {
		// Without a WAIT a Cluster's own pipeline routes each call (and follows a moved slot).
		s.runOn(ctx, s.Client, script, calls, nil, w, cmds, errs)
		return cmds, errs
	}
	// With a WAIT on a Cluster, one pipeline per master, each on that master's own client (nodeFor:
	// a WAIT must follow the writes on their connection), in parallel.
	type node struct {
		client pipeliner
		calls  []int
	}
	var nodes []*node
	byClient := map[pipeliner]*node{}
	for i, c := range calls {
		client, err := cluster.MasterForKey(ctx, c.Keys[0])
		if err != nil {
			errs[i] = err
			cmds[i] = redis.NewCmd(ctx)
			cmds[i].SetErr(err)
			continue
		}
		n := byClient[client]
		if n == nil {
			n = &node{client: client}
			byClient[client] = n
			nodes = append(nodes, n)
		}
		n.calls = append(n.calls, i)
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { s.runOn(ctx, n.client, script, calls, n.calls, w, cmds, errs) })
	}
	wg.Wait()
	return cmds, errs
}

// runOn sends the calls numbered which (all of them when nil) to one master in one pipeline, with a
// WAIT after them when w asks for one, and fills their cmds and errs.
func (s *Store) runOn(ctx context.Context, client pipeliner, script *redis.Script, calls []Call, which []int, w *waitSetting,
	cmds []*redis.Cmd, errs []error) {
	if which == nil {
		which = make([]int, len(calls))
		for i := range which {
			which[i] = i
		}
	}
	var wait *redis.Cmd
	for attempt := 0; ; attempt++ {
		_, _ = client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range which {
				cmds[i] = script.EvalSha(ctx, p, calls[i].Keys, calls[i].Args...)
			}
			if w.n > 0 {
				// Not in go-redis's Pipeliner: WAIT numreplicas timeout-ms.
				wait = p.Do(ctx, "wait", w.n, w.timeout.Milliseconds())
			}
			return nil
		})
		noScript := false
		for _, i := range which {
			if err := cmds[i].Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				noScript = true
			}
		}
		if !noScript || attempt > 0 {
			break
		}
		// The first call after a restart or a failover: load the script on this master and go again
		// (a call that found no script ran nothing).
		if err := script.Load(ctx, client).Err(); err != nil {
			for _, i := range which {
				errs[i] = err
			}
			return
		}
	}
	var acked error
	waited := false
	for _, i := range which {
		err := cmds[i].Err()
		switch {
		case err == nil || err == redis.Nil:
			if w.n > 0 && !waited {
				acked, waited = s.repl.judge(wait, w), true
			}
			errs[i] = acked
		case noReplicas(err) != err:
			if w.n > 0 {
				s.repl.waits.WithLabelValues("timeout").Inc()
			}
			errs[i] = noReplicas(err) // the master refused to write: nothing written
		case isReply(err):
			errs[i] = err // the script failed: nothing to wait for
		default:
			if w.n > 0 {
				s.repl.waits.WithLabelValues("error").Inc()
			}
			errs[i] = err
		}
	}
}

// Acked sends write's commands to the master that holds key followed by WAIT, in one pipeline on one
// connection, and reports whether enough replicas confirmed them (nil), did not in time (ErrNotAcked),
// or the store did not answer. A write followed by WAIT also covers every write the master made
// before it, whichever connection made them: the replication stream is ordered. Without
// redis.wait_replicas it only writes.
func (s *Store) Acked(ctx context.Context, key string, write func(p redis.Pipeliner)) error {
	node, err := s.nodeFor(ctx, key)
	if err != nil {
		return err
	}
	w := s.repl.wait.Load()
	var wait *redis.Cmd
	_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		write(p)
		if w.n > 0 {
			wait = p.Do(ctx, "wait", w.n, w.timeout.Milliseconds())
		}
		return nil
	})
	if wait == nil || (err != nil && wait.Err() == nil) {
		return err
	}
	return s.repl.judge(wait, w)
}

// noReplicas turns a master's NOREPLICAS refusal (min-replicas-to-write) into ErrNotAcked.
func noReplicas(err error) error {
	if err != nil && redis.HasErrorPrefix(err, "NOREPLICAS") {
		return fmt.Errorf("%w: %v", ErrNotAcked, err)
	}
	return err
}

// judge reads a WAIT's answer into the metric and the error RunAcked returns.
func (r *replication) judge(wait *redis.Cmd, w *waitSetting) error {
	n, err := wait.Int64()
	switch {
	case err != nil:
		r.waits.WithLabelValues("error").Inc()
		return fmt.Errorf("wait: %w", err)
	case n < int64(w.n):
		r.waits.WithLabelValues("timeout").Inc()
		return fmt.Errorf("%w (%d of %d within %s)", ErrNotAcked, n, w.n, w.timeout)
	}
	r.waits.WithLabelValues("acked").Inc()
	return nil
}

// isReply reports whether err is an error Redis answered (a script error), not a failed connection.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !strings.HasPrefix(err.Error(), "LOADING") && !strings.HasPrefix(err.Error(), "READONLY")
}

// pipeliner is what RunAcked needs of the client of one master.
type pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	redis.Scripter
}

// nodeFor is the client of the master holding key: on a Cluster that master's own client (a pipeline
// of the ClusterClient would send the keyless WAIT to a node of its choosing, where it counts nothing),
// else the client itself, whose pipelines use one connection.
func (s *Store) nodeFor(ctx context.Context, key string) (pipeliner, error) {
	if cluster, ok := s.Client.(*redis.ClusterClient); ok {
		return cluster.MasterForKey(ctx, key)
	}
	return s.Client, nil
}
