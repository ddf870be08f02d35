package web

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"text/template"
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
