package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/testutil/proc"
)

// ErrCLINotInstalled means redis-cli (Debian's redis-tools, installed with redis-server) is not on
// PATH; it is what joins the nodes of a cluster.
var ErrCLINotInstalled = errors.New("redis-cli is not installed")

// clusterBusOffset is how far above its client port a cluster node listens for the other nodes: the
// bus port is always port+10000 (https://redis.io/docs/latest/operate/oss_and_stack/management/scaling/).
const clusterBusOffset = 10000

// Cluster is a private Redis Cluster of masters without replicas, each a redis-server on loopback.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts masters redis-server processes in cluster mode (each in its own directory, on a
// port whose bus port is free too), joins them with `redis-cli --cluster create`, which splits the
// 16384 hash slots evenly, and waits until every node reports cluster_state:ok with every slot
// assigned and every node known.
func StartCluster(masters int) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNotInstalled
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, ErrCLINotInstalled
	}
	c := &Cluster{}
	for range masters {
		node, err := start(freeClusterPort, func(dir string) []string {
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000"}
		})
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("cluster node: %w", err)
		}
		c.nodes = append(c.nodes, node)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, c.Addrs()...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(30 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Addrs are the host:port of every node, each a master.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Node returns the i-th node, e.g. to kill it.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// Stop kills every node and removes their directories.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		n.Stop()
	}
}

// waitOK polls CLUSTER INFO on every node until each says the cluster is ok, all slots are assigned
// and it knows every node as a master with slots. redis-cli returns once the nodes agree on the
// configuration, which can be a moment before each of them has marked the cluster ok.
func (c *Cluster) waitOK(within time.Duration) error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": "16384",
		"cluster_slots_ok":       "16384",
		"cluster_known_nodes":    strconv.Itoa(len(c.nodes)),
		"cluster_size":           strconv.Itoa(len(c.nodes)),
	}
	deadline := time.Now().Add(within)
	var last string
	for _, addr := range c.Addrs() {
		client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := client.ClusterInfo(ctx).Result()
			cancel()
			if err == nil {
				if last = mismatch(info, want); last == "" {
					break
				}
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				_ = client.Close()
				return fmt.Errorf("redis cluster node %s not ready within %s: %s", addr, within, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = client.Close()
	}
	return nil
}

// mismatch returns the first field of a CLUSTER INFO reply that differs from want, "" when none does.
func mismatch(info string, want map[string]string) string {
	got := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Sprintf("%s:%s, want %s", k, got[k], v)
		}
	}
	return ""
}

// freeClusterPort returns a free loopback port P whose bus port P+10000 exists and is free as well.
func freeClusterPort() (int, error) {
	for range 200 {
		port, err := proc.FreePort()
		if err != nil {
			return 0, err
		}
		if port+clusterBusOffset > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+clusterBusOffset)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, errors.New("no free pair of ports P and P+10000 on loopback")
}
