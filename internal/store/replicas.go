package store

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/metrics"
)

// Replication: what a failover can take away, and what edgeq does about it (docs/reference.md
// "Failover").
//
// Redis replicates asynchronously: a write the master has answered may not be on any replica yet, and a
// failover that promotes a replica loses it. For most of edgeq's state that costs little (a heartbeat,
// a cached read), but a reservation that was forwarded to the shop and then lost is a unit sold twice.
// With redis.wait_replicas > 0, the writes that must survive are followed by WAIT on the connection
// that made them (WAIT counts the writes of its own connection; the replication stream is ordered, so a
// later write acknowledged means every earlier one is), and count as done only when enough replicas
// acknowledged them within redis.wait_timeout.

// ErrNotAcked means the write was made on the master but fewer replicas than redis.wait_replicas
// confirmed it within redis.wait_timeout: a failover now could lose it. The caller undoes it (or leaves
// it to the compensation path) and does not act on it.
var ErrNotAcked = errors.New("store: the replicas did not confirm the write in time")

// replication is a store's WAIT settings and what it has seen of its masters and replicas.
type replication struct {
	wait atomic.Pointer[waitSetting] // redis.wait_replicas and wait_timeout

	waits      *prometheus.CounterVec // edgeq_store_replica_waits_total{result}
	connected  prometheus.Gauge       // edgeq_store_replicas_connected
	changes    prometheus.Counter     // edgeq_store_master_changes_total
	generation atomic.Uint64          // counts master changes seen (masters.observe)
	changedAt  atomic.Int64           // unix ms of the latest change
	masters    masters
	logger     *slog.Logger
}

// waitSetting is what a WAIT waits for: n replicas, at most timeout.
type waitSetting struct {
	n       int
	timeout time.Duration
}

func newReplication(waitReplicas int, waitTimeout time.Duration, cluster bool, logger *slog.Logger) *replication {
	r := &replication{
		logger: logger,
		waits: metrics.NewCounterVec("store_replica_waits_total",
			"WAITs after writes that must survive a failover (redis.wait_replicas), by result: acked, timeout (fewer replicas confirmed in time), error.", "result"),
		connected: metrics.NewGauge("store_replicas_connected",
			"Replicas of the store's master that are online (on a Cluster: the fewest of any master); -1 until known."),
		changes: metrics.NewCounter("store_master_changes_total",
			"Times a new connection found another Redis master process than before (a failover or a restart)."),
		masters: masters{cluster: cluster, seen: map[string]bool{}, opened: time.Now()},
	}
	for _, result := range []string{"acked", "timeout", "error"} {
		r.waits.WithLabelValues(result)
	}
	r.wait.Store(&waitSetting{n: waitReplicas, timeout: waitTimeout})
	r.connected.Set(-1)
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// Collectors are the store's metrics, for the server's registry.
func (s *Store) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.repl.waits, s.repl.connected, s.repl.changes}
}

// WaitReplicas is redis.wait_replicas: 0 means writes are not waited for.
func (s *Store) WaitReplicas() int { return s.repl.wait.Load().n }

// SetWaitReplicas changes the WAIT settings of a store; tests use it on stores made by Wrap.
func (s *Store) SetWaitReplicas(n int, timeout time.Duration) {
	s.repl.wait.Store(&waitSetting{n: n, timeout: timeout})
}

// Generation counts the master changes this process has seen (a failover or a restart of Redis: a
// new connection answered with another run_id than before); ChangedAt is when the latest was seen.
// The waiting room compares it before and after a join (waitroom/failover.go).
func (s *Store) Generation() uint64 { return s.repl.generation.Load() }

// ChangedAt is when the latest master change was seen; the zero time if none.
func (s *Store) ChangedAt() time.Time {
	ms := s.repl.changedAt.Load()
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// ConnectedReplicas is how many replicas the master has online (INFO replication); on a Cluster the
// fewest of any master, since every master holds some products.
func (s *Store) ConnectedReplicas(ctx context.Context) (int, error) {
	if cluster, ok := s.Client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		fewest := -1
		err := cluster.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
			n, err := onlineReplicas(ctx, master)
			mu.Lock()
			if err == nil && (fewest < 0 || n < fewest) {
				fewest = n
			}
			mu.Unlock()
			return err
		})
		return fewest, err
	}
	return onlineReplicas(ctx, s.Client)
}

func onlineReplicas(ctx context.Context, c redis.Cmdable) (int, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.SplitSeq(info, "\n") {
		// slave0:ip=10.0.0.2,port=6379,state=online,offset=123,lag=0
		if strings.HasPrefix(line, "slave") && strings.Contains(line, ":ip=") && strings.Contains(line, "state=online") {
			n++
		}
	}
	return n, nil
}

// WatchReplicas checks every interval how many replicas the master has online, keeps the gauge current,
// and says (at once, and whenever it changes) when there are fewer than redis.wait_replicas: every
// reservation then waits out redis.wait_timeout and is refused.
func (s *Store) WatchReplicas(ctx context.Context, interval time.Duration) {
	if s.Embedded() {
		return
	}
	last := -2
	for {
		n, err := s.ConnectedReplicas(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			s.repl.connected.Set(float64(n))
			if n != last {
				switch want := s.WaitReplicas(); {
				case want > 0 && n < want:
					s.repl.logger.Warn("fewer Redis replicas are online than redis.wait_replicas: every reservation, "+
						"lottery draw, invitation use and revocation waits redis.wait_timeout and is refused",
						"replicas", n, "wait_replicas", want)
				case want > 0 && last >= 0 && last < want:
					s.repl.logger.Info("enough Redis replicas are online again", "replicas", n, "wait_replicas", want)
				}
				last = n
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// masters tells a new master from the one before: every new connection reads the server's run_id
// (INFO server), which changes when another process answers (a replica promoted by a failover) or the
// same one restarted (which may have lost its last second of writes).
type masters struct {
	cluster bool
	opened  time.Time

	mu   sync.Mutex
	last string          // one server or Sentinel: the master's run_id
	seen map[string]bool // Cluster: every master's
}

// observe records the run_id of a new connection's server and reports whether it is a change. On a
// Cluster, whose client connects to each master on first use, a master met for the first time is a
// change only if it says so itself: promoted from a replica (fresh, a promotion keeps the old
// replication id as the second one), or started a moment ago.
func (m *masters) observe(runID string, promotedOrRestarted bool) (changed bool, previous string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.cluster {
		previous = m.last
		m.last = runID
		return previous != "" && previous != runID, previous
	}
	if m.seen[runID] {
		return false, ""
	}
	changed = len(m.seen) > 0 && promotedOrRestarted
	m.seen[runID] = true
	return changed, ""
}

// onConnect is go-redis's hook for every new connection: it reads the server's run_id and counts a
// change of master. A failure to read it is not the connection's failure (the managed services that
// rename INFO still work, without this check).
func (r *replication) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "server").Result() // one section a call: Redis before 7.0 takes no more
	if err != nil {
		return nil
	}
	runID := infoField(info, "run_id")
	if runID == "" || infoField(info, "redis_mode") == "sentinel" {
		return nil // go-redis runs the same hook on its connections to the Sentinels
	}
	fresh := false
	if r.masters.cluster {
		uptime, _ := strconv.ParseInt(infoField(info, "uptime_in_seconds"), 10, 64)
		repl, _ := cn.Info(ctx, "replication").Result()
		second := infoField(repl, "second_repl_offset")
		fresh = uptime < 60 || (second != "" && second != "-1")
	}
	if changed, previous := r.masters.observe(runID, fresh); changed {
		r.changedAt.Store(time.Now().UnixMilli())
		r.generation.Add(1)
		r.changes.Inc()
		r.logger.Warn("the Redis master changed (a failover or a restart): writes it had not passed on to its "+
			"replicas are lost; queue positions resume above the highest any replica has seen",
			"previous_run_id", short(previous), "run_id", short(runID))
	}
	return nil
}

// infoField reads one "name:value" line of an INFO answer.
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func short(runID string) string {
	if len(runID) > 12 {
		return runID[:12]
	}
	return runID
}
