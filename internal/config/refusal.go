package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"text/template"

	"github.com/edgeq/edgeq/internal/vocab"
)

// RefusalData is what a route's refusal.json template sees: every value is already escaped for use
// inside a JSON string ({{.Message}} goes between quotes), so a template cannot be broken by a message.
type RefusalData struct {
	Status  int
	Code    string
	Message string
	Fields  map[string]string
}

// CompileRefusal parses a refusal.json template and checks that it produces valid JSON for every
// refusal edgeq can send through it (refusalSamples): every code (internal/vocab), without fields and with every field
// a refusal can carry, the field values hostile (quotes, braces, U+2028, 10 KB), as a visitor's own
// text can be (a JSON key, an id). A template that inserts a value outside a JSON string, or breaks
// for one code only, is refused here rather than at a visitor. "" is no template (the standard body):
// nil, nil.
func CompileRefusal(text string) (*template.Template, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	t, err := template.New("refusal.json").Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, err
	}
	for _, sample := range refusalSamples() {
		body, err := RenderRefusal(t, sample)
		if err != nil {
			return nil, fmt.Errorf("fails for a sample refusal %s: %w", sample.Code, err)
		}
		if !json.Valid(body) {
			return nil, fmt.Errorf("does not produce valid JSON for a sample refusal %s %s: %s", sample.Code, describeFields(sample.Fields), vocab.Clip(string(body), 120))
		}
	}
	return t, nil
}

// hostileValue is a field value that breaks a template which does not put it inside a JSON string:
// a brace, a quote, a backslash, the line separators JavaScript once refused in strings, template and
// HTML syntax, control characters, and a value that would add a key. longValue is 14 KB of the same
// (a long id or JSON key).
const hostileValue = "}\"\\\u2028\u2029{{.Code}}</script><!--\x00\x1f\x7f0, \"x\": 1"

var longValue = strings.Repeat(`"}]\`+"\u2028", 2048)

// refusalSamples are the refusals CompileRefusal renders: a realistic one; then every code without
// fields and with every field at hostileValue; every eighth code with every field at longValue (each
// long rendering costs); and every field alone (for a template that ranges over .Fields).
func refusalSamples() []RefusalData {
	message := "A \"quoted\"\n<message> \\ with \u2028 odd characters"
	samples := []RefusalData{
		{Status: http.StatusConflict, Code: "INSUFFICIENT_STOCK", Message: "Sorry, this item is sold out.", Fields: map[string]string{"remaining_stock": "0"}},
	}
	names := vocab.RefusalFields()
	every := func(value string) map[string]string {
		fields := make(map[string]string, len(names))
		for _, name := range names {
			fields[name] = value
		}
		return fields
	}
	for i, c := range vocab.Codes() {
		samples = append(samples,
			RefusalData{Status: c.Status, Code: c.Name, Message: message, Fields: map[string]string{}},
			RefusalData{Status: c.Status, Code: c.Name, Message: message, Fields: every(hostileValue)})
		if i%8 == 0 {
			samples = append(samples, RefusalData{Status: c.Status, Code: c.Name, Message: message, Fields: every(longValue)})
		}
	}
	for _, name := range names {
		samples = append(samples, RefusalData{Status: vocab.InvalidRequest.Status, Code: vocab.InvalidRequest.Name, Message: message, Fields: map[string]string{name: `}`}})
	}
	return samples
}

// describeFields names a sample's fields for a refusal of the template: the hostile value, clipped.
func describeFields(fields map[string]string) string {
	if len(fields) == 0 {
		return "without fields"
	}
	for _, v := range fields {
		if len(v) > 20 {
			return fmt.Sprintf("with %d fields of %d bytes", len(fields), len(v))
		}
		return fmt.Sprintf("with %d fields of value %q", len(fields), v)
	}
	return ""
}

// RenderRefusal runs a compiled refusal template on d, escaping every value for a JSON string.
func RenderRefusal(t *template.Template, d RefusalData) ([]byte, error) {
	esc := RefusalData{Status: d.Status, Code: jsonString(d.Code), Message: jsonString(d.Message), Fields: map[string]string{}}
	for k, v := range d.Fields {
		esc.Fields[k] = jsonString(v)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, esc); err != nil {
		return nil, err
	}
	if buf.Len() == 0 {
		return nil, errors.New("produces an empty body")
	}
	return buf.Bytes(), nil
}

// jsonString is s as the inside of a JSON string (without the quotes).
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
