package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
)

// RefusalData is what a route's refusal.json template sees: every value is already escaped for use
// inside a JSON string ({{.Message}} goes between quotes), so a template cannot be broken by a message.
type RefusalData struct {
	Status  int
	Code    string
	Message string
	Fields  map[string]string
}

// CompileRefusal parses a refusal.json template and checks that it produces valid JSON for a sample
// refusal, with and without extra fields, and for a message full of characters JSON must escape.
// "" is no template (the standard body): nil, nil.
func CompileRefusal(text string) (*template.Template, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	t, err := template.New("refusal.json").Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, err
	}
	samples := []RefusalData{
		{Status: 409, Code: "INSUFFICIENT_STOCK", Message: "Sorry, this item is sold out.", Fields: map[string]string{"remaining_stock": "0"}},
		{Status: 503, Code: "BUSY", Message: "A \"quoted\"\n<message> \\ with \u2028 odd characters", Fields: map[string]string{}},
	}
	for _, sample := range samples {
		body, err := RenderRefusal(t, sample)
		if err != nil {
			return nil, err
		}
		if !json.Valid(body) {
			return nil, fmt.Errorf("does not produce valid JSON for a sample refusal: %s", clipSample(body))
		}
	}
	return t, nil
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

func clipSample(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}
