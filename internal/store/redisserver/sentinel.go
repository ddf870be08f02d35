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
		s, err := startWith(freePort, func(dir string, port int) ([]string, error) {
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

// CurrentMaster is the host:port the first Sentinel that answers names as the master now (SENTINEL
// get-master-addr-by-name). During a failover it is the promoted replica once the promotion is done.
func (t *Topology) CurrentMaster(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range t.sentinels {
		addr, err := masterAddr(ctx, s.Addr(), t.name)
		if err == nil {
			return addr, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no Sentinel names the master of %s: %w", t.name, errors.Join(errs...))
}

// KillMaster ends the process the Sentinels name as the master with SIGKILL, as a crash would, keeping
// its directory, and returns its address (WaitFailover's from). Before the kill it gives the Sentinels
// the requested failover-timeout (see heldFailoverTimeout): kill the master with it rather than with
// Master().Kill(), which would leave them a failover-timeout of an hour.
func (t *Topology) KillMaster() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := t.CurrentMaster(ctx)
	if err != nil {
		return "", err
	}
	victim := t.server(addr)
	if victim == nil {
		return "", fmt.Errorf("sentinel names %s as master of %s, which is no process of the topology", addr, t.name)
	}
	if t.held {
		ms := strconv.FormatInt(t.failoverTimeout.Milliseconds(), 10)
		for _, s := range t.sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
			err := sc.Set(ctx, t.name, "failover-timeout", ms).Err()
			sc.Close()
			if err != nil {
				return "", fmt.Errorf("sentinel %s: set failover-timeout %sms: %w", s.Addr(), ms, err)
			}
		}
		t.held = false
	}
	victim.Kill()
	return addr, nil
}

// LoseMaster is the original master's machine lost with its network, as in a zone failure: what the
// master sent that was still on its way to a delayed replica never arrives (each delaying proxy is
// closed, dropping what it holds), then the master is killed (KillMaster). KillMaster alone is a
// process crash on a live machine: the bytes it had sent still arrive, so a delayed replica misses
// nothing it was sent. It returns the master's address (WaitFailover's from).
func (t *Topology) LoseMaster() (string, error) {
	for _, p := range t.proxies {
		if p != nil {
			p.Close()
		}
	}
	return t.KillMaster()
}

// WaitFailover waits until every Sentinel names a master other than from, has finished the failover
// (its SENTINEL MASTER is that server, flagged a plain master), and that server answers ROLE as a
// master, and returns its host:port. The leader names the promoted replica a moment before it has
// reconfigured the other replicas and ended the failover; waiting for the end means a KillMaster or
// RestartOldMaster that follows meets a settled topology.
func (t *Topology) WaitFailover(ctx context.Context, from string) (string, error) {
	var last string
	for {
		addr, err := t.agreedMaster(ctx)
		switch {
		case err != nil:
			last = err.Error()
		case addr == from:
			last = "the Sentinels still name " + from
		default:
			if last = t.failoverUnfinished(ctx, addr); last != "" {
				break
			}
			role, err := role(ctx, addr)
			if err == nil && role == "master" {
				return addr, nil
			}
			last = fmt.Sprintf("the Sentinels name %s, whose role is %q (%v)", addr, role, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no failover of %s away from %s: %s: %w\n%s", t.name, from, last, ctx.Err(), t.sentinelLogs())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// failoverUnfinished says which Sentinel has not yet switched its master to addr and ended the
// failover; "" when all have.
func (t *Topology) failoverUnfinished(ctx context.Context, addr string) string {
	for _, s := range t.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		m, err := sc.Master(ctx, t.name).Result()
		sc.Close()
		if err != nil {
			return fmt.Sprintf("sentinel %s: master %s: %v", s.Addr(), t.name, err)
		}
		if got := net.JoinHostPort(m["ip"], m["port"]); got != addr || m["flags"] != "master" {
			return fmt.Sprintf("sentinel %s: master %s with flags %s, failover to %s not finished", s.Addr(), got, m["flags"], addr)
		}
	}
	return ""
}

// RestartOldMaster restarts the original master after KillMaster and WaitFailover, with its old
// arguments: no --replicaof, so it comes back as a master (with what its append-only file kept, if
// MasterArgs gave it one), as a crashed master restarted by its supervisor would. It then waits up to
// 30s until Sentinel has turned it into a replica of the current master (REPLICAOF, "+convert-to-slave"
// in Sentinel's log) and its link to that master is up.
func (t *Topology) RestartOldMaster() error {
	if err := t.master.Restart(); err != nil {
		return fmt.Errorf("restart old master %s: %w", t.master.Addr(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last string
	for {
		current, err := t.CurrentMaster(ctx)
		switch {
		case err != nil:
			last = err.Error()
		case current == t.master.Addr():
			last = "the Sentinels still name the old master as master: was there a failover?"
		default:
			info, err := infoFields(ctx, t.master.Addr(), "replication")
			if err != nil {
				last = err.Error()
				break
			}
			link := net.JoinHostPort(info["master_host"], info["master_port"])
			if info["role"] == "slave" && link == current && info["master_link_status"] == "up" {
				return nil
			}
			last = fmt.Sprintf("role %s, master %s, link %s; current master %s",
				info["role"], link, info["master_link_status"], current)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("old master %s did not become a replica within 30s: %s\n%s", t.master.Addr(), last, t.sentinelLogs())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

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
			p.Close()
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

// agreedMaster is the master every Sentinel names; an error if one does not answer or they differ
// (they agree once the hellos carrying a new configuration have gone round).
func (t *Topology) agreedMaster(ctx context.Context) (string, error) {
	var agreed string
	for i, s := range t.sentinels {
		addr, err := masterAddr(ctx, s.Addr(), t.name)
		if err != nil {
			return "", err
		}
		if i > 0 && addr != agreed {
			return "", fmt.Errorf("sentinel %s names %s, sentinel %s names %s", t.sentinels[0].Addr(), agreed, s.Addr(), addr)
		}
		agreed = addr
	}
	return agreed, nil
}

// waitReplication waits until every replica reports its link to the master up and the master counts
// them all as connected.
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
				sc.Close()
				return fmt.Errorf("sentinel %s not ready within %s: %s\n%s", s.Addr(), within, last, t.sentinelLogs())
			case <-time.After(50 * time.Millisecond):
			}
		}
		sc.Close()
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
	defer sc.Close()
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

// masterAddr asks the Sentinel at addr for the master of name.
func masterAddr(ctx context.Context, addr, name string) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: get-master-addr-by-name %s: %w", addr, name, err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: get-master-addr-by-name %s: reply %q", addr, name, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// role is the first element of ROLE from the server at addr: "master", "slave" or "sentinel".
func role(ctx context.Context, addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	reply, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", fmt.Errorf("ROLE at %s: %w", addr, err)
	}
	if len(reply) == 0 {
		return "", fmt.Errorf("ROLE at %s: empty reply", addr)
	}
	r, _ := reply[0].(string)
	return r, nil
}

// infoFields is one INFO section of the server at addr as field: value.
func infoFields(ctx context.Context, addr, section string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
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
