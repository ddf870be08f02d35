package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/testutil/proc"
	"github.com/edgeq/edgeq/internal/testutil/tcpproxy"
)

// heldFailoverTimeout is the failover-timeout the Sentinels run with while a replica replicates through
// a delaying proxy and the original master has not been killed. Sentinel re-points a replica whose
// master address differs from the master's ("+fix-slave-config") once failover-timeout has passed
// since it saw the replica's configuration, and the proxy's address always differs: with the usual
// 5s, the delay would silently vanish a few seconds into a test. KillMaster sets the requested
// failover-timeout before it kills.
const heldFailoverTimeout = time.Hour

// replicationArgs go to every server of a topology, each of which may be a master one day. Redis 7
// sends a full synchronisation straight down the socket and, by default, waits 5s first for more
// replicas to share it; every replica would then take 5s to come up after a start or a failover.
func replicationArgs(more ...string) []string {
	return append([]string{"--repl-diskless-sync-delay", "0"}, more...)
}

// Topology is a master, its replicas and Sentinels, each a private process on loopback. Its methods
// are for one goroutine at a time, like a Server's.
type Topology struct {
	name      string
	master    *Server
	replicas  []*Server
	proxies   []*tcpproxy.Proxy // by replica; nil for a replica without a delay
	sentinels []*Server
	// failoverTimeout is the failover-timeout asked for; held says the Sentinels run with
	// heldFailoverTimeout until KillMaster.
	failoverTimeout time.Duration
	held            bool
}

// TopologyOptions describe a Topology. The zero value of each field but Replicas means its default.
type TopologyOptions struct {
	MasterName      string           // default "edgeq"
	Replicas        []ReplicaOptions // at least 1
	Sentinels       int              // default 1 (quorum 1); n > 1 -> quorum n/2+1 (3 -> 2)
	DownAfter       time.Duration    // Sentinel down-after-milliseconds, default 1s
	FailoverTimeout time.Duration    // Sentinel failover-timeout, default 5s
	MasterArgs      []string         // extra redis-server arguments for the master (e.g. "--appendonly", "yes")
}

// ReplicaOptions describe one replica of a Topology.
type ReplicaOptions struct {
	// Delay > 0 makes the replica replicate through a tcpproxy.Proxy that delays every byte between
	// it and the original master by Delay one way, in order: a replica in another zone. Sentinel and
	// clients reach the replica directly. After a failover Sentinel points every replica at the new
	// master directly, so the delay applies to the original master's links only.
	Delay time.Duration
	// Priority is the replica-priority (lower is promoted first); 0 means Redis's default, 100.
	Priority int
}

// StartTopology starts the master, then each replica (through its delaying proxy when it has a delay)
// and waits until every replica has synchronised, then starts the Sentinels and waits until each knows
// every replica, with fresh INFO from it, and the other Sentinels. A failover can start as soon as it
// returns.
func StartTopology(o TopologyOptions) (*Topology, error) {
	if len(o.Replicas) == 0 {
		return nil, errors.New("a Sentinel topology needs at least 1 replica")
	}
	if o.MasterName == "" {
		o.MasterName = "edgeq"
	}
	if o.Sentinels == 0 {
		o.Sentinels = 1
	}
	if o.Sentinels < 0 {
		return nil, fmt.Errorf("a Sentinel topology needs at least 1 Sentinel, not %d", o.Sentinels)
	}
	if o.DownAfter < 0 || o.FailoverTimeout < 0 {
		return nil, fmt.Errorf("negative down-after (%s) or failover-timeout (%s)", o.DownAfter, o.FailoverTimeout)
	}
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 5 * time.Second
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNotInstalled
	}
	t := &Topology{name: o.MasterName, failoverTimeout: o.FailoverTimeout}
	var err error
	if t.master, err = Start(replicationArgs(o.MasterArgs...)...); err != nil {
		return nil, fmt.Errorf("topology master: %w", err)
	}
	for i, r := range o.Replicas {
		if r.Priority < 0 || r.Delay < 0 {
			t.Stop()
			return nil, fmt.Errorf("replica %d: negative priority (%d) or delay (%s)", i, r.Priority, r.Delay)
		}
		upstream := t.master.Addr()
		var proxy *tcpproxy.Proxy
		if r.Delay > 0 {
			if proxy, err = tcpproxy.Start(upstream); err != nil {
				t.Stop()
				return nil, fmt.Errorf("replica %d: delaying proxy: %w", i, err)
			}
			proxy.SetDelay(r.Delay)
			upstream = proxy.Addr()
			t.held = true
		}
		t.proxies = append(t.proxies, proxy)
		_, port, _ := net.SplitHostPort(upstream)
		args := replicationArgs("--replicaof", "127.0.0.1", port)
		if r.Priority > 0 {
			args = append(args, "--replica-priority", strconv.Itoa(r.Priority))
		}
		replica, err := Start(args...)
		if err != nil {
			t.Stop()
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		t.replicas = append(t.replicas, replica)
	}
	if err := t.waitReplication(30 * time.Second); err != nil {
		t.Stop()
		return nil, err
	}

	quorum := 1
	if o.Sentinels > 1 {
		quorum = o.Sentinels/2 + 1
	}
	failoverTimeout := o.FailoverTimeout
	if t.held {
		failoverTimeout = heldFailoverTimeout
	}
	_, masterPort, _ := net.SplitHostPort(t.master.Addr())
	for i := range o.Sentinels {
		s, err := startWith(proc.FreePort, func(dir string, port int) ([]string, error) {
			conf := filepath.Join(dir, "sentinel.conf")
			// resolve-hostnames comes before monitor: it decides how monitor's address is read.
			settings := fmt.Sprintf(`port %[1]d
bind 127.0.0.1
dir %[2]s
logfile %[3]s
sentinel resolve-hostnames no
sentinel monitor %[4]s 127.0.0.1 %[5]s %[6]d
sentinel down-after-milliseconds %[4]s %[7]d
sentinel failover-timeout %[4]s %[8]d
sentinel parallel-syncs %[4]s 1
`, port, dir, filepath.Join(dir, "sentinel.log"), t.name, masterPort, quorum,
				o.DownAfter.Milliseconds(), failoverTimeout.Milliseconds())
			// Sentinel rewrites its file (with the replicas and Sentinels it finds), so it must be
			// writable, as must the directory, where the rewrite goes first.
			if err := os.WriteFile(conf, []byte(settings), 0o644); err != nil {
				return nil, fmt.Errorf("write %s: %w", conf, err)
			}
			return []string{conf, "--sentinel"}, nil
		})
		if err != nil {
			t.Stop()
			return nil, fmt.Errorf("sentinel %d: %w", i, err)
		}
		t.sentinels = append(t.sentinels, s)
		if err := tuneSentinel(s.Addr()); err != nil {
			t.Stop()
			return nil, fmt.Errorf("sentinel %d: %w", i, err)
		}
	}
	if err := t.waitSentinels(30 * time.Second); err != nil {
		t.Stop()
		return nil, err
	}
	return t, nil
}

// MasterName is the name the Sentinels monitor the master under.
func (t *Topology) MasterName() string { return t.name }

// SentinelAddrs are the host:port of every Sentinel.
func (t *Topology) SentinelAddrs() []string {
	addrs := make([]string, len(t.sentinels))
	for i, s := range t.sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Master is the original master's process, whatever its role now.
func (t *Topology) Master() *Server { return t.master }

// Replica is the i-th replica's process (in the order of TopologyOptions.Replicas), whatever its role
// now.
func (t *Topology) Replica(i int) *Server { return t.replicas[i] }

// ReplicaProxy is the proxy the i-th replica replicates from the original master through, to change
// its delay or cut the link; nil when the replica has no delay.
func (t *Topology) ReplicaProxy(i int) *tcpproxy.Proxy { return t.proxies[i] }

// Stop ends the Sentinels first (so that none reacts to the rest going), then the replicas, their
// proxies and the master, and removes their directories.
func (t *Topology) Stop() {
	for _, s := range t.sentinels {
		s.Stop()
	}
	for _, r := range t.replicas {
		r.Stop()
	}
	for _, p := range t.proxies {
		if p != nil {
			_ = p.Close()
		}
	}
	if t.master != nil {
		t.master.Stop()
	}
}

// server is the master or replica process at addr, nil if none is.
func (t *Topology) server(addr string) *Server {
	if t.master.Addr() == addr {
		return t.master
	}
	for _, r := range t.replicas {
		if r.Addr() == addr {
			return r
		}
	}
	return nil
}

func (t *Topology) waitReplication(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	want := strconv.Itoa(len(t.replicas))
	var last string
	for {
		last = ""
		for i, r := range t.replicas {
			info, err := infoFields(ctx, r.Addr(), "replication")
			if err != nil {
				last = err.Error()
				break
			}
			if s := info["master_link_status"]; s != "up" {
				last = fmt.Sprintf("replica %d (%s): master_link_status:%s", i, r.Addr(), s)
				break
			}
		}
		if last == "" {
			info, err := infoFields(ctx, t.master.Addr(), "replication")
			switch {
			case err != nil:
				last = err.Error()
			case info["connected_slaves"] != want:
				last = fmt.Sprintf("master %s: connected_slaves:%s, want %s", t.master.Addr(), info["connected_slaves"], want)
			default:
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replicas not in sync within %s: %s", within, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitSentinels waits until every Sentinel sees the master as a master, lists every replica as a
// connected replica that reported its link to the master up (so it has had fresh INFO from it and can
// promote it), and counts the other Sentinels.
func (t *Topology) waitSentinels(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for _, s := range t.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		var last string
		for {
			last = t.sentinelMismatch(ctx, sc)
			if last == "" {
				break
			}
			select {
			case <-ctx.Done():
				_ = sc.Close()
				return fmt.Errorf("sentinel %s not ready within %s: %s\n%s", s.Addr(), within, last, t.sentinelLogs())
			case <-time.After(50 * time.Millisecond):
			}
		}
		_ = sc.Close()
	}
	return nil
}

// sentinelMismatch is what a Sentinel does not know yet, "" when it knows everything waitSentinels
// waits for.
func (t *Topology) sentinelMismatch(ctx context.Context, sc *redis.SentinelClient) string {
	master, err := sc.Master(ctx, t.name).Result()
	if err != nil {
		return err.Error()
	}
	if master["flags"] != "master" {
		return fmt.Sprintf("master %s:%s has flags %s", master["ip"], master["port"], master["flags"])
	}
	if want := strconv.Itoa(len(t.sentinels) - 1); master["num-other-sentinels"] != want {
		return fmt.Sprintf("knows %s other sentinels, want %s", master["num-other-sentinels"], want)
	}
	replicas, err := sc.Replicas(ctx, t.name).Result()
	if err != nil {
		return err.Error()
	}
	known := map[string]map[string]string{}
	for _, r := range replicas {
		known[net.JoinHostPort(r["ip"], r["port"])] = r
	}
	for i, r := range t.replicas {
		k, ok := known[r.Addr()]
		switch {
		case !ok:
			return fmt.Sprintf("does not know replica %d (%s)", i, r.Addr())
		case k["flags"] != "slave":
			return fmt.Sprintf("replica %d (%s) has flags %s", i, r.Addr(), k["flags"])
		case k["master-link-status"] != "ok":
			return fmt.Sprintf("replica %d (%s) has master-link-status %s", i, r.Addr(), k["master-link-status"])
		}
	}
	return ""
}

// sentinelLogs is the end of each Sentinel's log, for an error that says Sentinel did not do something
// in time: its events (+sdown, +odown, +elected-leader, +fix-slave-config...) say why.
func (t *Topology) sentinelLogs() string {
	const lines = 30
	var b strings.Builder
	for _, s := range t.sentinels {
		path := filepath.Join(s.Dir(), "sentinel.log")
		log, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(&b, "sentinel %s: %v\n", s.Addr(), err)
			continue
		}
		all := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
		fmt.Fprintf(&b, "last lines of %s (sentinel %s):\n", path, s.Addr())
		for _, l := range all[max(0, len(all)-lines):] {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// tuneSentinel makes the Sentinel at addr notice things sooner than its defaults, which are made for
// production and would keep a test waiting, with SENTINEL DEBUG (Redis 7.0 and later): INFO every
// second rather than every 10s (a replica's role, a restarted master), hellos every 500ms rather than
// 2s (other Sentinels; and a restarted old master is turned into a replica 4 hello periods after it
// comes back: 2s rather than 8s), and no TILT mode, which a test machine busy with the race detector
// could trigger and which stops Sentinel acting for 30s. A redis-server older than 7.0 keeps the
// defaults, which only make tests slower.
func tuneSentinel(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = sc.Close() }()
	args := []any{"sentinel", "debug", "info-period", 1000, "publish-period", 500, "tilt-trigger", 3_600_000}
	err := sc.Process(ctx, redis.NewStatusCmd(ctx, args...))
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%v: %w", args, err)
	}
	return nil
}

func infoFields(ctx context.Context, addr, section string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s at %s: %w", section, addr, err)
	}
	fields := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields, nil
}
