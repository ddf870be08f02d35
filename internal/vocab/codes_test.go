package vocab

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every code has one name and a status edgeq answers with; Codes lists each once, in order: the
// built-in ones (the admission kinds add theirs with NewCode when they are linked).
func TestCodes_EveryCodeOnceWithAStatus(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes() {
		if seen[c.Name] || c.Name == "" || c.Status < 200 || c.Status > 599 {
			t.Errorf("code %+v: listed twice, unnamed or without a status", c)
		}
		seen[c.Name] = true
	}
	if len(seen) < 35 || Codes()[0] != InvalidRequest || Codes()[len(Codes())-1] != RetryFailed {
		t.Errorf("Codes() lists %d codes from %v to %v", len(seen), Codes()[0], Codes()[len(Codes())-1])
	}
}

// edgeq check renders refusal templates with every field a refusal can carry (RefusalFields): kept
// equal to the fields edgeq's code adds with With, anywhere in the module.
func TestRefusalFields_EveryWithKey(t *testing.T) {
	// Keys given to a *slog.Logger's With, not to an Error's.
	loggerKeys := map[string]bool{"listener": true, "correlation_id": true}
	with := regexp.MustCompile(`\bWith\("([a-z_]+)",`)
	fields := map[string]bool{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range with.FindAllStringSubmatch(string(text), -1) {
			if !loggerKeys[m[1]] {
				fields[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(maps.Keys(fields))
	if got := RefusalFields(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("RefusalFields differs from the With keys in the code:\nRefusalFields: %v\ncode:          %v", got, want)
	}
}

// NewCode refuses a name made twice: a code has one definition.
func TestNewCode_ANameMadeTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewCode made INVALID_REQUEST a second time")
		}
	}()
	NewCode(400, InvalidRequest.Name)
}
