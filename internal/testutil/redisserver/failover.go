package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Failures of a Topology and what the Sentinels make of them: the kill of the master (as a crash, or
// with its machine and network: LoseMaster), waiting for the failover to end, and the old master's
// return as a replica.

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
			_ = sc.Close()
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
			_ = p.Close()
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
		_ = sc.Close()
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

// masterAddr asks the Sentinel at addr for the master of name.
func masterAddr(ctx context.Context, addr, name string) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = sc.Close() }()
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
	defer func() { _ = c.Close() }()
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
