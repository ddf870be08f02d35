package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/token"
)

// The test binary doubles as the edgeq binary: with this variable set it runs main, so tests exercise
// real processes, signals and exit codes without a separate build step.
const asBinary = "EDGEQ_TESTBINARY_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asBinary) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func edgeq(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asBinary+"=1")
	return cmd
}

func runEdgeq(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := edgeq(args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), out.String(), errOut.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

func TestCheck_GoodFileExitsZero(t *testing.T) {
	code, stdout, _ := runEdgeq(t, "check", "-config", "../../config.example.yaml")
	if code != 0 || !strings.Contains(stdout, "ok") {
		t.Fatalf("exit %d: %s", code, stdout)
	}
}

func TestCheck_BadFileReportsEveryProblemAndExitsOne(t *testing.T) {
	code, stdout, stderr := runEdgeq(t, "check", "-config", "../../internal/config/testdata/bad/everything.yaml")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	want := []string{
		"server.listne: unknown key",
		`origin.timeout: invalid duration "5 seconds"`,
		`routes[0].match: "PUT" is not a ServeMux pattern`,
		`routes[1].queue: "nope" is not the id of any queue`,
		`queues[0].id: "bad id" must be`,
		`origin.url: "shop.example" is not an absolute http(s) URL`,
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("missing %q in:\n%s", w, stdout)
		}
	}
	if !strings.Contains(stderr, "6 problem(s)") {
		t.Errorf("stderr: %s", stderr)
	}
}

// A file that is valid but risky checks clean (exit 0) and says why on stderr: here Turnstile used by
// a route while turnstile.hostnames is empty, so a response solved for any site is accepted with that
// site's Host.
func TestCheck_WarnsWhenTurnstileHostnamesAreEmpty(t *testing.T) {
	dir := t.TempDir()
	const file = `turnstile: {site_key: "0x4AAAAAAAsite", secret_key: "0x4AAAAAAAsecret"%s}
routes:
  - {name: checkout, match: "POST /checkout/{p}", turnstile: true}
`
	const warning = "warning: turnstile.hostnames is empty"
	without := filepath.Join(dir, "without.yaml")
	with := filepath.Join(dir, "with.yaml")
	os.WriteFile(without, []byte(fmt.Sprintf(file, "")), 0o600)
	os.WriteFile(with, []byte(fmt.Sprintf(file, `, hostnames: ["shop.example"]`)), 0o600)
	code, stdout, stderr := runEdgeq(t, "check", "-config", without)
	if code != 0 || !strings.Contains(stdout, "ok") || !strings.Contains(stderr, warning) || !strings.Contains(stderr, "route checkout") {
		t.Fatalf("without hostnames: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if code, _, stderr := runEdgeq(t, "check", "-config", with); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("with hostnames: exit %d\nstderr %s", code, stderr)
	}
}

// A stock route that counts buyers by queue place (user: token, the default) checks clean, with a note
// that a buyer who joins again can buy again and what counts a person instead; user: visitor or a
// signed-in session gets no note.
func TestCheck_NotesThatUserTokenCountsPlacesNotPeople(t *testing.T) {
	dir := t.TempDir()
	const file = `queues:
  - {id: drop}
products:
  - {id: sneaker, stock: 10, per_user_limit: 1}
routes:
  - {name: add_to_cart, match: "POST /cart/{p}", queue: drop, admission: {type: stock, product: "path:p"%s}}
`
	const note = "note: routes[add_to_cart].admission.user is token: per_user_limit counts one place in line"
	for user, wantNote := range map[string]bool{"": true, ", user: token": true, ", user: visitor": false, `, user: "cookie:session"`: false} {
		path := filepath.Join(dir, "c.yaml")
		os.WriteFile(path, []byte(fmt.Sprintf(file, user)), 0o600)
		code, stdout, stderr := runEdgeq(t, "check", "-config", path)
		if code != 0 || !strings.Contains(stdout, "ok") || strings.Contains(stderr, note) != wantNote {
			t.Fatalf("user %q: exit %d, want the note %v\nstdout %s\nstderr %s", user, code, wantNote, stdout, stderr)
		}
		if wantNote && !strings.Contains(stderr, "user: visitor") {
			t.Fatalf("the note does not name user: visitor: %s", stderr)
		}
	}
}

// A queue that sells out with a product the file does not declare is probably a typo: check says so.
func TestCheck_WarnsWhenSoldOutWithNamesAnUnknownProduct(t *testing.T) {
	dir := t.TempDir()
	const file = `queues:
  - {id: drop, sold_out_with: [%s]}
products:
  - {id: sneaker, stock: 10}
`
	typo, right := filepath.Join(dir, "typo.yaml"), filepath.Join(dir, "right.yaml")
	os.WriteFile(typo, []byte(fmt.Sprintf(file, "sneakr")), 0o600)
	os.WriteFile(right, []byte(fmt.Sprintf(file, "sneaker")), 0o600)
	if code, _, stderr := runEdgeq(t, "check", "-config", typo); code != 0 || !strings.Contains(stderr, "warning: queues[drop].sold_out_with names sneakr") {
		t.Fatalf("typo: exit %d\nstderr %s", code, stderr)
	}
	if code, _, stderr := runEdgeq(t, "check", "-config", right); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("declared product: exit %d\nstderr %s", code, stderr)
	}
}

// With Sentinel or Cluster and no redis.wait_replicas, a failover can sell units twice:
// check says so; with wait_replicas set it is quiet; wait_replicas with the embedded store is refused.
func TestCheck_WarnsThatAFailoverCanSellTwiceWithoutWaitReplicas(t *testing.T) {
	dir := t.TempDir()
	const file = `redis: {addrs: ["10.0.0.1:26379", "10.0.0.2:26379"], master_name: mymaster%s}
`
	without, with, embedded := filepath.Join(dir, "without.yaml"), filepath.Join(dir, "with.yaml"), filepath.Join(dir, "embedded.yaml")
	os.WriteFile(without, []byte(fmt.Sprintf(file, "")), 0o600)
	os.WriteFile(with, []byte(fmt.Sprintf(file, ", wait_replicas: 1")), 0o600)
	os.WriteFile(embedded, []byte("redis: {wait_replicas: 1}\n"), 0o600)
	if code, _, stderr := runEdgeq(t, "check", "-config", without); code != 0 ||
		!strings.Contains(stderr, "warning: redis.wait_replicas is 0 with sentinel") || !strings.Contains(stderr, "a failover can sell units twice") {
		t.Fatalf("sentinel without wait_replicas: exit %d\nstderr %s", code, stderr)
	}
	if code, _, stderr := runEdgeq(t, "check", "-config", with); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("sentinel with wait_replicas: exit %d\nstderr %s", code, stderr)
	}
	if code, stdout, stderr := runEdgeq(t, "check", "-config", embedded); code != 1 ||
		!strings.Contains(stdout+stderr, "redis.wait_replicas: 1, but the embedded store has no replicas") {
		t.Fatalf("embedded with wait_replicas: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

func TestCheck_Usage(t *testing.T) {
	if code, _, stderr := runEdgeq(t, "check"); code != 2 || !strings.Contains(stderr, "-config FILE is required") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, _ := runEdgeq(t, "frobnicate"); code != 2 {
		t.Fatalf("unknown command: exit %d", code)
	}
}

// -h lists the commands and exits 0, before and after a command.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, stdout, _ := runEdgeq(t, args...)
		if code != 0 || !strings.Contains(stdout, "edgeq check -config FILE") || !strings.Contains(stdout, "edgeq keygen") {
			t.Fatalf("%v: exit %d: %q", args, code, stdout)
		}
	}
	for _, command := range []string{"serve", "check", "keygen"} {
		code, _, stderr := runEdgeq(t, command, "-h")
		if code != 0 || !strings.Contains(stderr, "Usage of edgeq "+command) {
			t.Fatalf("%s -h: exit %d: %q", command, code, stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runEdgeq(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "edgeq ") || !strings.Contains(stdout, "go1.") {
		t.Fatalf("exit %d: %q", code, stdout)
	}
}

func TestKeygen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signing.pem")
	code, _, stderr := runEdgeq(t, "keygen", "-out", path)
	if code != 0 || !strings.Contains(stderr, "kid ") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v mode %v", err, info.Mode())
	}
	if _, err := token.LoadSigningKey(path); err != nil {
		t.Fatal(err)
	}
	// Never overwrite a key.
	before, _ := os.ReadFile(path)
	if code, _, _ := runEdgeq(t, "keygen", "-out", path); code != 1 {
		t.Fatalf("second keygen to the same file: exit %d", code)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the existing key was changed")
	}
	// To stdout.
	code, stdout, _ := runEdgeq(t, "keygen")
	if code != 0 || !strings.HasPrefix(stdout, "-----BEGIN PRIVATE KEY-----") {
		t.Fatalf("exit %d: %s", code, stdout)
	}
}

func TestServe_BadConfigExitsOneWithOneLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("origin: {url: \"\"}\nqueues: [{id: \"a b\"}]\n"), 0o644)
	code, _, stderr := runEdgeq(t, "-config", path)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "edgeq: configuration: ") ||
		!strings.Contains(lines[0], "origin.url") || !strings.Contains(lines[0], "queues[0].id") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	// EDGEQ_CONFIG names the file too.
	cmd := edgeq("serve")
	cmd.Env = append(cmd.Env, "EDGEQ_CONFIG="+path)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Run(); err == nil || !strings.Contains(errOut.String(), "origin.url") {
		t.Fatalf("EDGEQ_CONFIG: %v %s", err, errOut.String())
	}
}

// SIGTERM with a slow request in flight: the request completes, then the process exits 0.
func TestServe_SIGTERMDrainsInFlightRequests(t *testing.T) {
	arrived := make(chan struct{}, 1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		time.Sleep(500 * time.Millisecond)
		fmt.Fprint(w, "slow answer")
	}))
	defer origin.Close()
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 10s}
admin: {listen: "127.0.0.1:0"}
origin: {url: %q}
`, origin.URL)), 0o644)

	cmd := edgeq("serve", "-config", path)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	public := waitForStart(t, stderr)

	result := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + public + "/slow")
		if err != nil {
			result <- "error: " + err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- fmt.Sprintf("%d %s", resp.StatusCode, body)
	}()
	<-arrived
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-result; got != "200 slow answer" {
		t.Fatalf("in-flight request: %s", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("edgeq did not exit 0 after SIGTERM: %v", err)
	}
}

// waitForStart reads edgeq's JSON log until the start line and returns the public address; the rest of
// the log keeps being drained so the process never blocks on a full pipe.
func waitForStart(t *testing.T, stderr io.Reader) string {
	t.Helper()
	public, _ := waitForListeners(t, stderr)
	return public
}

// serveReplica starts `edgeq serve` on the configuration at path as a process of its own, waits until it
// listens, and returns its public and admin addresses and a kill that ends it with SIGKILL, as a crash
// would. It is killed when the test ends in any case.
func serveReplica(t *testing.T, path string) (public, admin string, kill func()) {
	t.Helper()
	public, admin, process := serveReplicaProcess(t, path)
	return public, admin, func() { process.Kill() }
}

// serveReplicaProcess is serveReplica with the replica's process, to signal (SIGSTOP, SIGCONT).
func serveReplicaProcess(t *testing.T, path string) (public, admin string, process *os.Process) {
	t.Helper()
	cmd := edgeq("serve", "-config", path)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill(); cmd.Wait() })
	public, admin = waitForListeners(t, stderr) // reads stderr to its end, so the process never blocks on it
	return public, admin, cmd.Process
}

// waitForListeners waits for edgeq's start line and returns its public and admin addresses.
func waitForListeners(t *testing.T, stderr io.Reader) (public, admin string) {
	t.Helper()
	lines := bufio.NewScanner(stderr)
	found := make(chan [2]string, 1)
	go func() {
		for lines.Scan() {
			var entry struct {
				Msg    string `json:"msg"`
				Public string `json:"public"`
				Admin  string `json:"admin"`
			}
			if json.Unmarshal(lines.Bytes(), &entry) == nil && entry.Msg == "edgeq started" {
				found <- [2]string{entry.Public, entry.Admin}
			}
		}
		close(found)
	}()
	select {
	case addrs, ok := <-found:
		if !ok {
			t.Fatal("edgeq exited before starting")
		}
		return addrs[0], addrs[1]
	case <-time.After(30 * time.Second):
		t.Fatal("edgeq did not start within 30s")
	}
	return "", ""
}

// check -print shows the effective configuration: file, defaults and EDGEQ_* overrides together, with
// secrets masked; what it prints loads back as the same configuration.
func TestCheck_PrintShowsTheEffectiveConfigWithSecretsMasked(t *testing.T) {
	cmd := edgeq("check", "-config", "../../config.example.yaml", "-print")
	cmd.Env = append(cmd.Env, "EDGEQ_ADMIN_API_KEY=very-secret-admin-key", "EDGEQ_IDENTITY_SECRET=another-secret",
		"EDGEQ_ORIGIN_TIMEOUT=45s")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	printed := out.String()
	for _, secret := range []string{"very-secret-admin-key", "another-secret"} {
		if strings.Contains(printed, secret) {
			t.Fatalf("secret %q printed:\n%s", secret, printed)
		}
	}
	for _, want := range []string{`api_key: "********"`, `secret: "********"`, `timeout: "45s"`, `secret_key: ""`,
		`read_header_timeout: "10s"`, `  - id: "drop"`} {
		if !strings.Contains(printed, want) {
			t.Errorf("no %s in:\n%s", want, printed)
		}
	}

	// Round trip: the printed file checks clean and prints the same again.
	path := filepath.Join(t.TempDir(), "printed.yaml")
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	code, again, stderr := runEdgeq(t, "check", "-config", path, "-print")
	if code != 0 {
		t.Fatalf("printed config does not load: exit %d %s", code, stderr)
	}
	if again != printed {
		t.Fatalf("printing the printed config changed it:\n%s\n---\n%s", printed, again)
	}
}
