package config

import (
	"strings"
	"testing"
)

// A refusal template is rendered with hostile field values (quotes, braces,
// U+2028, 10 KB strings) for every code edgeq refuses with, so one that breaks JSON for some visitor's
// value or some code is refused when the configuration is loaded, not at a visitor.
func TestCompileRefusal_HostileValuesForEveryCode(t *testing.T) {
	good := []string{
		`{"success": false, "error": {"message": "{{.Message}}", "code": "{{.Code}}"}}`,
		`{"error": {"code": "{{.Code}}", "field": "{{.Fields.field}}", "left": "{{index .Fields "remaining_stock"}}"}}`,
		`{{if eq .Code "BID_TOO_LOW"}}{"highest": "{{.Fields.highest_amount}}"}{{else}}{"code": "{{.Code}}"}{{end}}`,
		`{"status": {{.Status}}, "fields": { {{range $k, $v := .Fields}}"{{$k}}": "{{$v}}", {{end}}"code": "{{.Code}}"}}`,
	}
	for _, text := range good {
		if _, err := CompileRefusal(text); err != nil {
			t.Errorf("%s: refused: %v", text, err)
		}
	}
	bad := []string{
		// A visitor's key "}" in field.
		`{"f": {{or .Fields.field 0}}}`,
		// A number edgeq sends, written without quotes: the values are escaped for use inside a JSON
		// string, and a refusal may carry a visitor's text under any name.
		`{"left": {{or .Fields.remaining_stock 0}}}`,
		// Broken only for one code.
		`{{if eq .Code "BID_TOO_LOW"}}{"highest": {{.Fields.highest_amount}}}{{else}}{"code": "{{.Code}}"}{{end}}`,
		`{{if eq .Code "QUEUE_REQUIRED"}}{"wait": "{{.Fields.wait_url}}"{{else}}{"code": "{{.Code}}"}{{end}}`,
		// Broken by a long value only.
		`{{if gt (len .Fields.problems) 5000}}{{.Fields.problems}}{{else}}{"p": "{{.Fields.problems}}"}{{end}}`,
	}
	for _, text := range bad {
		_, err := CompileRefusal(text)
		if err == nil || !strings.Contains(err.Error(), "valid JSON") {
			t.Errorf("%s: %v, want a refusal for invalid JSON", text, err)
		}
	}
}
