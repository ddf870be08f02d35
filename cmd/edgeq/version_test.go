package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// need finds a program the test runs, failing in CI (where .ci/run installs it) and skipping elsewhere.
func need(t *testing.T, program string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed: %v", program, err)
		}
		t.Skipf("%s not installed", program)
	}
	return path
}

// command runs a program in dir and returns its standard output, failing the test with its output.
func command(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// TestVersion_Stamped builds cmd/edgeq once, as make build does, with v9.8.7 stamped at link time, and
// asks it for its version in both places it tells it.
func TestVersion_Stamped(t *testing.T) {
	need(t, "go")
	bin := filepath.Join(t.TempDir(), "edgeq")
	command(t, ".", []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=v9.8.7", "-o", bin, ".")
	t.Run("edgeq version prints it with the build", func(t *testing.T) { versionPrinted(t, bin) })
	t.Run("metrics say it", func(t *testing.T) { versionOnMetrics(t, bin) })
}

func versionPrinted(t *testing.T, bin string) {
	out := command(t, ".", nil, bin, "version")
	lines := strings.Split(out, "\n")
	if lines[0] != "edgeq v9.8.7" {
		t.Fatalf("first line %q, want %q:\n%s", lines[0], "edgeq v9.8.7", out)
	}
	for _, want := range []string{"  revision  ", "  go        go1.", runtime.GOOS + "/", "-trimpath=true", "CGO_ENABLED=0", "GOOS=", "GOARCH="} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	cmd := exec.Command(bin, "version", "extra")
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("version with an argument: %v %s", err, out)
	}
}

var buildInfoLine = regexp.MustCompile(`(?m)^edgeq_build_info\{goversion="go1\.[^"]+",revision="[^"]+",version="([^"]*)"\} 1$`)

// A replica's /metrics says the version `edgeq version` prints: both read it from one place.
func versionOnMetrics(t *testing.T, bin string) {
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(path, []byte(`
server: {listen: "127.0.0.1:0", shutdown_timeout: 1s}
admin: {listen: "127.0.0.1:0"}
origin: {url: "http://127.0.0.1:9"}
log: {format: json}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "-config", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	_, admin := waitForListeners(t, stderr)
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := buildInfoLine.FindStringSubmatch(string(body))
	if m == nil || m[1] != "v9.8.7" {
		t.Fatalf("edgeq_build_info with version v9.8.7 not found on /metrics (found %q)", buildInfoLine.FindString(string(body)))
	}
}

// A release built from a tagged commit says the tag: a clone of this repository, holding this working
// tree as its commit, gets a tag; make's VERSION says it, and `make release` (for this platform alone)
// names its archive after it and stamps it into the edgeq inside.
func TestVersion_ReleaseOfATaggedCommitSaysTheTag(t *testing.T) {
	for _, program := range []string{"git", "make", "go", "tar", "sha256sum"} {
		need(t, program)
	}
	root := strings.TrimSpace(command(t, ".", nil, "git", "rev-parse", "--show-toplevel"))
	clone := filepath.Join(t.TempDir(), "edgeq")
	command(t, ".", nil, "git", "clone", "--quiet", root, clone)
	copyWorkingTree(t, root, clone)
	git := []string{"-c", "user.name=edgeq test", "-c", "user.email=test@edgeq.invalid", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}
	command(t, clone, nil, "git", append(git, "add", "-A")...)
	command(t, clone, nil, "git", append(git, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "the working tree")...)

	commit := strings.TrimSpace(command(t, clone, nil, "git", "describe", "--always"))
	if got := strings.TrimSpace(command(t, clone, nil, "make", "-s", "version")); got != commit {
		t.Errorf("make version on an untagged commit: %q, want %q", got, commit)
	}
	const tag = "v0.0.0-test.1"
	command(t, clone, nil, "git", append(git, "tag", tag)...)
	if got := strings.TrimSpace(command(t, clone, nil, "make", "-s", "version")); got != tag {
		t.Errorf("make version on a tagged commit: %q, want %q", got, tag)
	}

	command(t, clone, nil, "make", "-s", "release", "RELEASE_PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH)
	name := "edgeq_" + tag + "_" + runtime.GOOS + "_" + runtime.GOARCH
	dist := filepath.Join(clone, "dist")
	sums := command(t, dist, nil, "sha256sum", "-c", "SHA256SUMS")
	if sums != name+".tar.gz: OK\n" {
		t.Errorf("sha256sum -c SHA256SUMS: %q", sums)
	}
	listing := strings.Fields(command(t, dist, nil, "tar", "-tzf", name+".tar.gz"))
	want := []string{name + "/", name + "/CHANGELOG.md", name + "/LICENSE", name + "/README.md",
		name + "/THIRD_PARTY_LICENSES.md", name + "/config.example.yaml", name + "/edgeq"}
	if strings.Join(listing, " ") != strings.Join(want, " ") {
		t.Errorf("the archive holds %s, want %s", listing, want)
	}
	command(t, dist, nil, "tar", "-xzf", name+".tar.gz")
	out := command(t, dist, nil, filepath.Join(dist, name, "edgeq"), "version")
	if first, _, _ := strings.Cut(out, "\n"); first != "edgeq "+tag {
		t.Errorf("the released edgeq says %q, want %q", first, "edgeq "+tag)
	}
}

// copyWorkingTree makes the clone's files the working tree's: every file git tracks or would track
// (ignored ones such as bin/ and node_modules/ left out), and none that the working tree deleted.
func copyWorkingTree(t *testing.T, root, clone string) {
	t.Helper()
	names := strings.Split(command(t, root, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"), "\x00")
	// A file of the clone's commit that the working tree no longer lists (renamed or removed from the
	// index) goes, so the build sees the working tree's files alone.
	for _, name := range strings.Split(command(t, clone, nil, "git", "ls-files", "-z"), "\x00") {
		if name != "" && !slices.Contains(names, name) {
			os.Remove(filepath.Join(clone, name))
		}
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		src, dst := filepath.Join(root, name), filepath.Join(clone, name)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			os.Remove(dst)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() {
			continue // symbolic links and submodules: as committed
		}
		data, err := os.ReadFile(src)
		if err == nil {
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				err = os.WriteFile(dst, data, info.Mode().Perm())
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dst, info.Mode().Perm()) // WriteFile keeps an existing file's mode
	}
}
