package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/proc"
	"github.com/edgeq/edgeq/internal/testutil/redisserver"
	"github.com/edgeq/edgeq/internal/testutil/tcpproxy"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/server"
)

// chaosBench is the standing chaos run (docs/reliability.md): N edgeq replicas (processes of this
// binary, chaos-replica), Redis with a Sentinel, a replica on loopback and one lagging, a recording
// shop (slow, sometimes failing, sometimes past origin.timeout) each replica reaches through a link of
// its own, and buyers joining a queue and buying one product; a nemesis stops and resumes replicas,
// kills and restarts them, kills the Redis master, cuts and heals links to the shop and slows the shop.
// Then everything heals, edgeq settles, and the invariants are checked (chaoscheck.go): a violation
// is an error (exit 1), printed with the nemesis history that led to it.
func chaosBench(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	duration := fs.Duration("duration", 60*time.Second, "how long the nemesis runs")
	replicas := fs.Int("replicas", 3, "edgeq replicas")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "the nemesis's random seed (printed: a run can be repeated)")
	stock := fs.Int64("stock", 3000, "units of the product on sale")
	buyers := fs.Int("buyers", 24, "concurrent buyers")
	nemesis := fs.String("nemesis", "all", "what the nemesis does: all, or pause (only long stops of replica 0)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *replicas < 2 || *buyers < 1 || *stock < 1 || (*nemesis != "all" && *nemesis != "pause") {
		return errors.New("chaos: -replicas at least 2, -buyers and -stock positive, -nemesis all or pause")
	}
	run, err := startChaos(*replicas, *stock)
	if err != nil {
		return err
	}
	defer run.stop()
	_, _ = fmt.Fprintf(w, "chaos: %d replicas, Redis with a Sentinel and two replicas (one lagging 20ms), stock %d, %d buyers, nemesis %s for %s, seed %d\n",
		*replicas, *stock, *buyers, *nemesis, *duration, *seed)
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	var wg sync.WaitGroup
	for b := range *buyers {
		wg.Go(func() { run.buy(ctx, b) })
	}
	n := &nemesisRun{run: run, rng: rand.New(rand.NewPCG(*seed, *seed>>1|1)), start: time.Now(), onlyPauses: *nemesis == "pause"}
	n.loop(ctx)
	cancel()
	n.heal()
	wg.Wait()
	_, _ = fmt.Fprintf(w, "load: %d purchases answered, %d joins; settling (origin.timeout, a lease and a sweep)...\n",
		run.purchases.Load(), run.joins.Load())
	report, err := run.settleAndCheck()
	if err != nil {
		return err
	}
	report.print(w, n.history)
	if report.violated() {
		return fmt.Errorf("chaos: invariants violated (seed %d); replicas' logs in %s", *seed, run.dir)
	}
	_ = os.RemoveAll(run.dir)
	return nil
}

// chaosRun is the system under the nemesis.
type chaosRun struct {
	dir      string
	top      *redisserver.Topology
	shop     *chaosShop
	replicas []*chaosReplica
	client   *http.Client
	stock    int64

	purchases, joins atomic.Int64
	positions        sync.Map // queue position -> request id
	duplicates       atomic.Int64
}

// chaosReplica is one edgeq process and its link to the shop.
type chaosReplica struct {
	config        string
	public, admin string
	link          *tcpproxy.Proxy
	log           *os.File

	mu   sync.Mutex
	proc *proc.Process
	down bool // killed, not restarted yet
}

const (
	chaosOriginTimeout = time.Second
	chaosQueue         = "drop"
	chaosMaxInFlight   = 8 // the checkout route's max_in_flight
)

func startChaos(replicas int, stock int64) (*chaosRun, error) {
	dir, err := os.MkdirTemp("", "edgeq-chaos-")
	if err != nil {
		return nil, err
	}
	run := &chaosRun{dir: dir, stock: stock, client: &http.Client{Timeout: 60 * time.Second}}
	run.top, err = redisserver.StartTopology(redisserver.TopologyOptions{
		Replicas:   []redisserver.ReplicaOptions{{}, {Delay: 20 * time.Millisecond, Priority: 200}},
		MasterArgs: []string{"--appendonly", "yes"},
	})
	if err != nil {
		return nil, fmt.Errorf("the chaos run needs redis-server and redis-sentinel: %w", err)
	}
	if run.shop, err = startChaosShop(chaosOriginTimeout); err != nil {
		run.stop()
		return nil, err
	}
	key, _ := token.GenerateKey()
	pemBytes, _ := token.MarshalPrivateKey(key)
	keyPath := filepath.Join(dir, "signing.pem")
	if err := os.WriteFile(keyPath, pemBytes, 0o600); err != nil {
		run.stop()
		return nil, err
	}
	sentinels := `"` + strings.Join(run.top.SentinelAddrs(), `", "`) + `"`
	for i := range replicas {
		r := &chaosReplica{}
		if r.link, err = tcpproxy.Start(run.shop.addr); err != nil {
			run.stop()
			return nil, err
		}
		public, admin, err := freeAddrs()
		if err != nil {
			run.stop()
			return nil, err
		}
		r.public, r.admin = public, admin
		r.config = filepath.Join(dir, fmt.Sprintf("replica-%d.yaml", i))
		cfg := fmt.Sprintf(`
server: {listen: %q, shutdown_timeout: 2s}
admin: {listen: %q, api_key: %q}
origin: {url: "http://%s", timeout: %s}
redis: {addrs: [%s], master_name: %q, wait_replicas: 1, wait_timeout: 1s}
tokens: {signing_key_file: %q}
log: {level: info}
limits: {join_per_ip_per_minute: 0, status_per_ip_per_minute: 0}
queues:
  - {id: %s, capacity: 1000000, token_ttl: 10m}
products:
  - {id: p, stock: %d, per_user_limit: 1, name: "Chaos"}
routes:
  - name: checkout
    match: "POST /checkout/{product}"
    max_in_flight: %d
    hold: 30s
    hold_per_client: 10000
    admission: {type: stock, product: "path:product", user: "header:X-User", orphans: release}
`, public, admin, benchAdminKey, r.link.Addr(), chaosOriginTimeout, sentinels, run.top.MasterName(), keyPath, chaosQueue, stock, chaosMaxInFlight)
		if err := os.WriteFile(r.config, []byte(cfg), 0o600); err != nil {
			run.stop()
			return nil, err
		}
		if r.log, err = os.Create(filepath.Join(dir, fmt.Sprintf("replica-%d.log", i))); err != nil {
			run.stop()
			return nil, err
		}
		run.replicas = append(run.replicas, r)
		if err := r.start(); err != nil {
			run.stop()
			return nil, err
		}
	}
	return run, nil
}

// freeAddrs picks two free loopback ports: a replica keeps its addresses across restarts.
func freeAddrs() (string, string, error) {
	var addrs [2]string
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", err
		}
		addrs[i] = ln.Addr().String()
		_ = ln.Close()
	}
	return addrs[0], addrs[1], nil
}

// start starts the replica's process and waits until it is ready.
func (r *chaosReplica) start() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "chaos-replica", "-config", r.config)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	client := &http.Client{Timeout: time.Second}
	p, err := proc.StartReady(cmd, 30*time.Second, 50*time.Millisecond, func() error {
		resp, err := client.Get("http://" + r.admin + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc, r.down = p, false
	r.mu.Unlock()
	return nil
}

// signal sends the replica's process sig (SIGSTOP, SIGCONT); false when it is down.
func (r *chaosReplica) signal(sig syscall.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return false
	}
	return syscall.Kill(r.proc.Pid(), sig) == nil
}

// kill kills the replica's process (SIGKILL: no drain, nothing settled).
func (r *chaosReplica) kill() bool {
	r.mu.Lock()
	p := r.proc
	if r.down {
		r.mu.Unlock()
		return false
	}
	r.down = true
	r.mu.Unlock()
	_ = syscall.Kill(p.Pid(), syscall.SIGCONT) // a stopped process dies as well, but say so
	p.Kill()
	return true
}

func (run *chaosRun) stop() {
	for _, r := range run.replicas {
		r.mu.Lock()
		if r.proc != nil && !r.down {
			_ = syscall.Kill(r.proc.Pid(), syscall.SIGCONT)
			r.proc.Stop(syscall.SIGTERM, 3*time.Second)
		}
		r.mu.Unlock()
		if r.link != nil {
			_ = r.link.Close()
		}
		if r.log != nil {
			_ = r.log.Close()
		}
	}
	if run.shop != nil {
		run.shop.close()
	}
	if run.top != nil {
		run.top.Stop()
	}
}

// buy is one buyer: join the queue and note the position, then buy one unit as a new user, on the
// replicas in turn, until ctx ends.
func (run *chaosRun) buy(ctx context.Context, buyer int) {
	for i := 0; ctx.Err() == nil; i++ {
		r := run.replicas[(buyer+i)%len(run.replicas)]
		run.join(ctx, r)
		req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), "POST", "http://"+r.public+"/checkout/p", nil)
		req.Header.Set("X-User", fmt.Sprintf("buyer-%d-%d", buyer, i))
		resp, err := run.client.Do(req)
		if err != nil {
			time.Sleep(50 * time.Millisecond) // a replica down or stopped
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		run.purchases.Add(1)
	}
}

// join takes a queue place on r and notes its position: two request ids at one position would be a
// place handed to two visitors.
func (run *chaosRun) join(ctx context.Context, r *chaosReplica) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.PostForm("http://"+r.public+"/_edgeq/assign_queue_pos", url.Values{"queue_id": {chaosQueue}})
	if err != nil {
		return
	}
	var joined struct {
		RequestID string `json:"request_id"`
	}
	decodeJSON(resp, &joined)
	if joined.RequestID == "" {
		return
	}
	resp, err = client.Get("http://" + r.public + "/_edgeq/queue_pos/" + chaosQueue + "/" + joined.RequestID)
	if err != nil {
		return
	}
	var pos struct {
		Position int64 `json:"position"`
	}
	decodeJSON(resp, &pos)
	if pos.Position <= 0 {
		return
	}
	run.joins.Add(1)
	if prev, dup := run.positions.LoadOrStore(pos.Position, joined.RequestID); dup && prev != joined.RequestID {
		run.duplicates.Add(1)
	}
}

// chaosReplicaMain runs one replica of the chaos run: edgeq serve, in this binary.
func chaosReplicaMain(args []string) error {
	fs := flag.NewFlagSet("chaos-replica", flag.ContinueOnError)
	configPath := fs.String("config", "", "configuration file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx, server.Options{ConfigPath: *configPath, LogOutput: os.Stderr})
}
