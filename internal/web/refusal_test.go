package web

import (
	"encoding/json"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/edgeq/edgeq/internal/config"
)

// A route's refusal.json that renders invalid JSON at run time (a template edgeq
// check could not catch: a value only a visitor sends) gives way to edgeq's standard body, and is
// logged once per template, not per request.
func TestRefusal_InvalidJSONFallsBackToTheStandardBodyLoggedOnce(t *testing.T) {
	rs := responder(t)
	var logs logLines
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	broken := template.Must(template.New("refusal.json").Option("missingkey=zero").Parse(`{"f": {{or .Fields.field 0}}}`))
	other := template.Must(template.New("refusal.json").Option("missingkey=zero").Parse(`{"f": {{or .Fields.field 0}}}`))
	answer := func(tmpl *template.Template, route string, e *Error) (int, map[string]any, string) {
		t.Helper()
		r := httptest.NewRequest("POST", "/cart", nil)
		info := NewRequest(logger, "c1")
		info.Route, info.Refusal = route, tmpl
		r = r.WithContext(WithRequest(r.Context(), info))
		rec := httptest.NewRecorder()
		rs.Error(rec, r, e)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("not JSON: %v: %s", err, rec.Body)
		}
		return rec.Code, body, rec.Header().Get("Content-Type")
	}
	// A field value without a brace renders valid JSON: the template's own shape.
	if code, body, _ := answer(broken, "cart", ErrAmbiguousField.With("field", "7")); code != 400 || body["f"] != float64(7) {
		t.Fatalf("a harmless value: %d %v", code, body)
	}
	for range 3 {
		code, body, ct := answer(broken, "cart", ErrAmbiguousField.With("field", "}"))
		if code != 400 || body["error"] != "INVALID_REQUEST" || body["field"] != "}" || body["success"] != false ||
			!strings.HasPrefix(ct, "application/json") {
			t.Fatalf("a visitor's key \"}\": %d %v", code, body)
		}
	}
	if n := strings.Count(logs.String(), "refusal.json"); n != 1 {
		t.Fatalf("logged %d times for one template, want once:\n%s", n, logs.String())
	}
	// Another route's template is logged once too.
	answer(other, "checkout", ErrAmbiguousField.With("field", "}"))
	answer(other, "checkout", ErrAmbiguousField.With("field", "}"))
	if n := strings.Count(logs.String(), "refusal.json"); n != 2 {
		t.Fatalf("logged %d times for two templates, want twice:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "route=checkout") {
		t.Fatalf("the log line does not name the route:\n%s", logs.String())
	}
}

// logLines collects log output.
type logLines struct{ strings.Builder }

func (l *logLines) Write(p []byte) (int, error) { return l.Builder.Write(p) }

// edgeq check renders refusal templates with every code and every field a refusal can carry; config
// holds the lists (it cannot import this package). They are kept equal to the codes defined here and
// to the fields edgeq's code adds with With, anywhere in the module.
func TestRefusalSamples_CoverEveryCodeAndField(t *testing.T) {
	source, err := os.ReadFile("codes.go")
	if err != nil {
		t.Fatal(err)
	}
	statusOf := map[string]int{} // "StatusConflict" -> 409, after net/http's names
	for status := 100; status < 600; status++ {
		if text := http.StatusText(status); text != "" {
			statusOf["Status"+strings.NewReplacer(" ", "", "-", "").Replace(text)] = status
		}
	}
	codes := map[string]int{}
	for _, m := range regexp.MustCompile(`code\(http\.(Status\w+), "([A-Z_]+)"`).FindAllStringSubmatch(string(source), -1) {
		codes[m[2]] = statusOf[m[1]]
	}
	if len(codes) < 40 {
		t.Fatalf("found %d codes in codes.go: the pattern no longer matches", len(codes))
	}
	if got := config.RefusalSampleCodes(); !maps.Equal(got, codes) {
		t.Errorf("config's refusal sample codes differ from codes.go:\nconfig:   %v\ncodes.go: %v", got, codes)
	}

	// Keys given to a *slog.Logger's With, not to an Error's.
	loggerKeys := map[string]bool{"listener": true, "correlation_id": true}
	with := regexp.MustCompile(`\bWith\("([a-z_]+)",`)
	fields := map[string]bool{}
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
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
	if got := config.RefusalSampleFields(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("config's refusal sample fields differ from the With keys in the code:\nconfig: %v\ncode:   %v", got, want)
	}
}
