// Package scripts holds the repository's helper scripts; its tests run them against a stand-in for
// the go command.
package scripts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type goRun struct {
	out    string
	status int
}

// fakeGo writes a stand-in for the go command that answers its n-th call with runs[n] and logs each
// call's arguments to the file it returns.
func fakeGo(t *testing.T, runs ...goRun) (goCmd, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >> '" + calls + "'\nn=$(wc -l < '" + calls + "')\ncase $n in\n"
	for i, r := range runs {
		out := filepath.Join(dir, "out"+strconv.Itoa(i+1))
		if err := os.WriteFile(out, []byte(r.out), 0o644); err != nil {
			t.Fatal(err)
		}
		script += "  " + strconv.Itoa(i+1) + ") cat '" + out + "'; exit " + strconv.Itoa(r.status) + " ;;\n"
	}
	script += "esac\necho unexpected call; exit 99\n"
	goCmd = filepath.Join(dir, "go")
	if err := os.WriteFile(goCmd, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return goCmd, calls
}

func raceAt(seconds string) string {
	return "fuzz: elapsed: 9s, execs: 133117 (18573/sec), new interesting: 0 (total: 38)\n" +
		"--- FAIL: FuzzThing (" + seconds + "s)\n    context deadline exceeded\nFAIL\nexit status 1\nFAIL\texample/pkg\t" + seconds + "s\n"
}

const clean = "PASS\nok  \texample/pkg\t10.1s\n"

func TestFuzzScript(t *testing.T) {
	finding := "--- FAIL: FuzzThing (5.75s)\n    --- FAIL: FuzzThing (0.00s)\n        fuzz_test.go:35: wrong\n\n" +
		"    Failing input written to testdata/fuzz/FuzzThing/1253\nFAIL\n"
	for _, c := range []struct {
		name       string
		fuzztime   string
		runs       []goRun
		wantStatus int
		wantCalls  int
	}{
		{"clean run", "10s", []goRun{{clean, 0}}, 0, 1},
		{"coordinator race, clean second run", "10s", []goRun{{raceAt("10.35"), 1}, {clean, 0}}, 0, 2},
		{"coordinator race twice", "10s", []goRun{{raceAt("10.35"), 1}, {raceAt("10.2"), 1}}, 1, 2},
		{"coordinator race, then a finding", "10s", []goRun{{raceAt("10.35"), 1}, {finding, 1}}, 1, 2},
		{"a finding", "10s", []goRun{{finding, 1}}, 1, 1},
		{"a bare deadline long after fuzztime (a hanging input)", "10s", []goRun{{raceAt("31.02"), 1}}, 1, 1},
		{"a bare deadline with a count budget", "5000x", []goRun{{raceAt("10.35"), 1}}, 1, 1},
		{"a deadline inside the target's own failure", "10s", []goRun{{"--- FAIL: FuzzThing (10.35s)\n    fuzz_test.go:9: dial: context deadline exceeded\nFAIL\n", 1}}, 1, 1},
		{"a build failure", "10s", []goRun{{"# example/pkg\n./x.go:1:1: syntax error\nFAIL\texample/pkg [build failed]\n", 1}}, 1, 1},
		{"coordinator race with minutes", "1m", []goRun{{raceAt("60.4"), 1}, {clean, 0}}, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			goCmd, calls := fakeGo(t, c.runs...)
			out, err := exec.Command("bash", "fuzz.sh", "./pkg", "FuzzThing", c.fuzztime, goCmd).CombinedOutput()
			status := 0
			if exit, ok := err.(*exec.ExitError); ok {
				status = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != c.wantStatus {
				t.Errorf("exit %d, want %d\n%s", status, c.wantStatus, out)
			}
			logged, _ := os.ReadFile(calls)
			lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
			if len(lines) != c.wantCalls {
				t.Errorf("go ran %d times, want %d: %q", len(lines), c.wantCalls, lines)
			}
			for _, l := range lines {
				if l != "test -run ^$ -fuzz ^FuzzThing$ -fuzztime "+c.fuzztime+" ./pkg" {
					t.Errorf("go called as %q", l)
				}
			}
		})
	}
}

// fuzztargets.sh lists every fuzz function of the module, as the Go parser finds them in the test
// files, so `make fuzz` never misses a new one.
func TestFuzzTargets_EveryFuzzFunctionOfTheModule(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "scripts/fuzztargets.sh")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fuzztargets.sh: %v", err)
	}
	got := strings.Fields(string(out))
	var want []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				want = append(want, "./"+filepath.ToSlash(rel)+":"+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) || !slices.Contains(got, "./internal/graphql:FuzzGraphQLArguments") {
		t.Errorf("fuzztargets.sh lists\n%v\nthe module's fuzz functions are\n%v", got, want)
	}
}
