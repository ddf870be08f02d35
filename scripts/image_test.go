package scripts

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"

	// The bot-check providers register their sections (challenge.<name>) as edgeq's binary does.
	_ "github.com/edgeq/edgeq/botcheck"
)

// instruction is one Dockerfile instruction: its keyword (upper case), its arguments as written,
// and the line it starts on.
type instruction struct {
	cmd, args string
	line      int
}

// parseDockerfile splits a Dockerfile into stages (each from its FROM on), joining continued lines and
// leaving out comments and blank lines.
func parseDockerfile(t *testing.T, text string) [][]instruction {
	t.Helper()
	var stages [][]instruction
	var cur string
	start := 0
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur == "" {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		cur += trimmed
		cmd, args, _ := strings.Cut(cur, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		cur = ""
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) == 0 {
		t.Fatal("Dockerfile: no FROM")
	}
	return stages
}

func readDockerfile(t *testing.T) (build, final []instruction) {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(data))
	if len(stages) != 2 {
		t.Fatalf("Dockerfile: %d stages, want 2 (build, then the image)", len(stages))
	}
	return stages[0], stages[1]
}

// copyStep is a COPY of the final stage.
type copyStep struct {
	fromBuild bool
	opts      []string
	srcs      []string
	dest      string
}

func parseCopy(t *testing.T, in instruction) copyStep {
	t.Helper()
	var c copyStep
	for _, w := range strings.Fields(in.args) {
		switch {
		case w == "--from=build":
			c.fromBuild = true
		case strings.HasPrefix(w, "--"):
			c.opts = append(c.opts, w)
		default:
			c.srcs = append(c.srcs, w)
		}
	}
	if len(c.srcs) < 2 {
		t.Fatalf("Dockerfile:%d: COPY %s: no source or destination", in.line, in.args)
	}
	c.dest = c.srcs[len(c.srcs)-1]
	c.srcs = c.srcs[:len(c.srcs)-1]
	return c
}

// targets lists the paths a COPY writes: the destination, or each source's name under a destination
// that ends with a slash.
func (c copyStep) targets() []string {
	if !strings.HasSuffix(c.dest, "/") {
		return []string{c.dest}
	}
	var out []string
	for _, s := range c.srcs {
		out = append(out, c.dest+path.Base(s))
	}
	return out
}

// finalSettings is what the final stage sets besides files.
type finalSettings struct {
	user       string
	env        map[string]string
	ports      []string
	entrypoint []string
	cmd        []string
	copies     []copyStep
}

func settingsOf(t *testing.T, stage []instruction) finalSettings {
	t.Helper()
	s := finalSettings{env: map[string]string{}}
	for _, in := range stage[1:] {
		switch in.cmd {
		case "USER":
			s.user = in.args
		case "ENV":
			key, value, ok := strings.Cut(in.args, "=")
			if !ok || strings.ContainsAny(key, " \t") {
				t.Fatalf("Dockerfile:%d: write ENV as KEY=value, one a line", in.line)
			}
			if unq, err := strconv.Unquote(value); err == nil {
				value = unq
			}
			s.env[key] = value
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				s.ports = append(s.ports, p)
			}
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := json.Unmarshal([]byte(in.args), &list); err != nil {
				t.Fatalf("Dockerfile:%d: %s in its JSON form, please: %v", in.line, in.cmd, err)
			}
			if in.cmd == "CMD" {
				s.cmd = list
			} else {
				s.entrypoint = list
			}
		case "COPY":
			s.copies = append(s.copies, parseCopy(t, in))
		}
	}
	slices.Sort(s.ports)
	return s
}

// TestDockerfile checks the image the Dockerfile promises (docs/deploy.md, "Docker"): an empty base,
// a non-root numeric user that /etc/passwd names, the files, the listeners it exposes, and a build
// stage whose binary is built as make build and scripts/image.sh build it.
func TestDockerfile(t *testing.T) {
	build, final := readDockerfile(t)
	if final[0].args != "scratch" {
		t.Errorf("Dockerfile:%d: the final stage is FROM %s, want scratch", final[0].line, final[0].args)
	}
	s := settingsOf(t, final)

	if s.user != "65532:65532" {
		t.Errorf("USER %q, want 65532:65532 (numeric, so that Kubernetes can tell it is not root)", s.user)
	}
	passwd, err := os.ReadFile("../deploy/image/passwd")
	if err != nil {
		t.Fatal(err)
	}
	group, err := os.ReadFile("../deploy/image/group")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:[^:]*:[^:]*:/sbin/nologin$`).Match(passwd) {
		t.Errorf("deploy/image/passwd has no nonroot user with uid and gid 65532:\n%s", passwd)
	}
	if !regexp.MustCompile(`(?m)^nonroot:x:65532:$`).Match(group) {
		t.Errorf("deploy/image/group has no nonroot group 65532:\n%s", group)
	}

	var written []string
	for _, c := range s.copies {
		written = append(written, c.targets()...)
	}
	for _, want := range []string{"/etc/ssl/certs/ca-certificates.crt", "/usr/share/zoneinfo", "/etc/passwd",
		"/etc/group", "/usr/local/bin/edgeq", "/etc/edgeq/config.yaml"} {
		if !slices.Contains(written, want) {
			t.Errorf("the final stage writes no %s (it writes %v)", want, written)
		}
	}

	if !slices.Equal(s.entrypoint, []string{"/usr/local/bin/edgeq"}) {
		t.Errorf("ENTRYPOINT %q, want the binary", s.entrypoint)
	}
	if len(s.cmd) != 3 || s.cmd[0] != "serve" || s.cmd[1] != "-config" || !slices.Contains(written, s.cmd[2]) {
		t.Errorf("CMD %q, want serve -config with the configuration the image holds", s.cmd)
	}
	// The configuration the image holds loads, and its listener and the admin listener the
	// environment sets are the ports the image exposes.
	for _, c := range s.copies {
		if c.fromBuild || !slices.Contains(c.targets(), "/etc/edgeq/config.yaml") {
			continue
		}
		t.Setenv("EDGEQ_ADMIN_LISTEN", s.env["EDGEQ_ADMIN_LISTEN"])
		cfg, err := config.Load(filepath.Join("..", c.srcs[0]))
		if err != nil {
			t.Fatalf("the image's configuration: %v", err)
		}
		for _, addr := range []string{cfg.Server.Listen, cfg.Admin.Listen} {
			_, port, _ := strings.Cut(addr, ":")
			if !slices.Contains(s.ports, port+"/tcp") {
				t.Errorf("listener %s: port %s is not one the image exposes (%v)", addr, port, s.ports)
			}
		}
	}
	if s.env["GOGC"] != "400" {
		t.Errorf("GOGC=%q, want 400 (docs/deploy.md, The Go runtime)", s.env["GOGC"])
	}

	// Every file the final stage takes from the build stage is made there: the binary by its go
	// build, the rest checked by name.
	var buildText string
	for _, in := range build {
		buildText += in.cmd + " " + in.args + "\n"
	}
	const goBuild = `CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/edgeq ./cmd/edgeq`
	if !strings.Contains(buildText, "RUN "+goBuild+"\n") || !strings.Contains(buildText, "ARG VERSION") {
		t.Errorf("the build stage does not build the binary with\n\t%s\nafter ARG VERSION:\n%s", goBuild, buildText)
	}
	for _, c := range s.copies {
		for _, src := range c.srcs {
			if c.fromBuild && !strings.Contains(buildText, src) {
				t.Errorf("the final stage copies %s from the build stage, which does not name it", src)
			}
		}
	}

	// make build, make image (scripts/image.sh) and the Dockerfile link the binary alike.
	script, err := os.ReadFile("image.sh")
	if err != nil {
		t.Fatal(err)
	}
	scriptBuild := `CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o "$to" ./cmd/edgeq`
	if !bytes.Contains(script, []byte(scriptBuild)) {
		t.Errorf("scripts/image.sh does not build the binary as the Dockerfile does; want\n\t%s", scriptBuild)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^LDFLAGS\s*:?=\s*-s -w -X main\.version=\$\(VERSION\)\s*$`).Match(makefile) {
		t.Error("the Makefile's LDFLAGS are not the Dockerfile's -s -w -X main.version=$(VERSION)")
	}
}

// runImageScript runs scripts/image.sh with args, on dockerfile when it is not "".
func runImageScript(t *testing.T, dockerfile string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"image.sh"}, args...)...)
	cmd.Env = os.Environ()
	if dockerfile != "" {
		f := filepath.Join(t.TempDir(), "Dockerfile")
		if err := os.WriteFile(f, []byte(dockerfile), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "DOCKERFILE="+f)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return errOut.String(), err
	}
	return out.String(), nil
}

// TestImageScript checks that scripts/image.sh's Containerfile is the Dockerfile's final stage with
// the build stage's files taken from this machine, and that it refuses what it cannot assemble.
func TestImageScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("this test needs bash, which runs scripts/image.sh")
		}
		t.Skip("no bash; skipped outside CI")
	}
	_, final := readDockerfile(t)
	out, err := runImageScript(t, "", "containerfile")
	if err != nil {
		t.Fatalf("scripts/image.sh containerfile: %v\n%s", err, out)
	}
	stages := parseDockerfile(t, out)
	if len(stages) != 1 {
		t.Fatalf("the Containerfile has %d stages, want 1:\n%s", len(stages), out)
	}
	got := stages[0]
	if len(got) != len(final) {
		t.Fatalf("the Containerfile has %d instructions, the final stage %d:\n%s", len(got), len(final), out)
	}
	for i, want := range final {
		g := got[i]
		if want.cmd == "COPY" {
			w := parseCopy(t, want)
			if w.fromBuild {
				for j, src := range w.srcs {
					w.srcs[j] = "build" + src
				}
			}
			gc := parseCopy(t, g)
			if gc.fromBuild || gc.dest != w.dest || !slices.Equal(gc.opts, w.opts) || !slices.Equal(gc.srcs, w.srcs) {
				t.Errorf("Dockerfile:%d: COPY %s\nbecomes COPY %s", want.line, want.args, g.args)
			}
			continue
		}
		if g.cmd != want.cmd || g.args != want.args {
			t.Errorf("Dockerfile:%d: %s %s\nbecomes %s %s", want.line, want.cmd, want.args, g.cmd, g.args)
		}
	}
	sw, sg := settingsOf(t, final), settingsOf(t, got)
	if sw.user != sg.user || !maps.Equal(sw.env, sg.env) || !slices.Equal(sw.ports, sg.ports) ||
		!slices.Equal(sw.entrypoint, sg.entrypoint) || !slices.Equal(sw.cmd, sg.cmd) {
		t.Errorf("settings differ:\nDockerfile    %+v\nContainerfile %+v", sw, sg)
	}

	for _, c := range []struct{ name, final, want string }{
		{"a base image", "FROM gcr.io/distroless/static-debian12:nonroot\nUSER 65532:65532\n", "must start FROM scratch"},
		{"a RUN", "FROM scratch\nRUN true\n", "RUN has no counterpart"},
		{"an unknown build file", "FROM scratch\nCOPY --from=build /etc/os-release /etc/os-release\n", "does not know how to make"},
		{"another stage", "FROM scratch\nCOPY --from=tools /x /x\n", "copies only from the build stage"},
		{"a continued line", "FROM scratch\nCMD [\"serve\", \\\n  \"-config\"]\n", "on one line"},
		{"a missing file", "FROM scratch\nCOPY no-such-file /etc/x\n", "not in the repository"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runImageScript(t, "FROM golang:1.26-bookworm AS build\n\n"+c.final, "containerfile")
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("err %v, output %q; want a failure saying %q", err, out, c.want)
			}
		})
	}
}
