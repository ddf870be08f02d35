// Package scripts holds the repository's helper scripts; its tests run them against a stand-in for
// the go command.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeGo writes a stand-in for the go command: "go test ... -fuzz ..." prints fuzzOut and exits
// fuzzStatus; any other "go test" (the corpus replay) prints "replayed" and exits replayStatus.
func fakeGo(t *testing.T, fuzzOut string, fuzzStatus, replayStatus int) string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "fuzz-output")
	if err := os.WriteFile(out, []byte(fuzzOut), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncase \"$*\" in\n" +
		"  *-fuzz*) cat '" + out + "'; exit " + strconv.Itoa(fuzzStatus) + " ;;\n" +
		"  *) echo replayed \"$@\"; exit " + strconv.Itoa(replayStatus) + " ;;\nesac\n"
	path := filepath.Join(dir, "go")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func runFuzz(t *testing.T, goCmd string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "fuzz.sh", "./pkg", "FuzzThing", "10s", goCmd)
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return string(out), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

const race = `fuzz: elapsed: 9s, execs: 133117 (18573/sec), new interesting: 0 (total: 38)
--- FAIL: FuzzThing (10.35s)
    context deadline exceeded
FAIL
exit status 1
FAIL	example/pkg	10.389s
`

func TestFuzzScript(t *testing.T) {
	for _, c := range []struct {
		name                     string
		out                      string
		fuzzStatus, replayStatus int
		wantStatus               int
		wantReplay               bool
	}{
		{"clean run", "PASS\nok  \texample/pkg\t10.1s\n", 0, 0, 0, false},
		{"coordinator race, corpus replays clean", race, 1, 0, 0, true},
		{"coordinator race, corpus replay fails", race, 1, 1, 1, true},
		{"a finding", "--- FAIL: FuzzThing (5.75s)\n    --- FAIL: FuzzThing (0.00s)\n        fuzz_test.go:35: wrong\n\n    Failing input written to testdata/fuzz/FuzzThing/1253\nFAIL\n", 1, 0, 1, false},
		{"a deadline inside the target's own failure", "--- FAIL: FuzzThing (10.35s)\n    fuzz_test.go:9: dial: context deadline exceeded\nFAIL\n", 1, 0, 1, false},
		{"a build failure", "# example/pkg\n./x.go:1:1: syntax error\nFAIL\texample/pkg [build failed]\n", 1, 0, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, status := runFuzz(t, fakeGo(t, c.out, c.fuzzStatus, c.replayStatus))
			if status != c.wantStatus {
				t.Errorf("exit %d, want %d\n%s", status, c.wantStatus, out)
			}
			if replayed := strings.Contains(out, "replayed test -count=1 -run ^FuzzThing$ ./pkg"); replayed != c.wantReplay {
				t.Errorf("replayed = %v, want %v\n%s", replayed, c.wantReplay, out)
			}
		})
	}
}
