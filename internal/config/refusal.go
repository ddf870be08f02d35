package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// CompileRefusal parses a refusal.json template and checks that it produces valid JSON for every
// refusal edgeq can send through it (refusalSamples): every code, without fields and with every field
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
			return nil, fmt.Errorf("does not produce valid JSON for a sample refusal %s %s: %s", sample.Code, describeFields(sample.Fields), clipSample(body))
		}
	}
	return t, nil
}

// refusalCodes is every code edgeq answers with and its status, as in internal/web/codes.go: config
// cannot import web, which imports config. TestRefusalSamples_CoverEveryCodeAndField (internal/web)
// keeps the two equal.
var refusalCodes = []struct {
	Status int
	Code   string
}{
	{400, "INVALID_REQUEST"}, {415, "UNSUPPORTED_MEDIA_TYPE"}, {413, "PAYLOAD_TOO_LARGE"}, {404, "NOT_FOUND"},
	{405, "METHOD_NOT_ALLOWED"}, {503, "STORE_UNAVAILABLE"}, {502, "ORIGIN_UNAVAILABLE"}, {504, "ORIGIN_TIMEOUT"},
	{500, "INTERNAL"}, {503, "BUSY"}, {503, "GATE_UNAVAILABLE"}, {400, "QUEUE_NOT_FOUND"}, {404, "REQUEST_NOT_FOUND"},
	{410, "EXPIRED"}, {202, "NOT_YET_SERVED"}, {429, "RATE_LIMITED"}, {429, "TOO_MANY_PLACES"}, {403, "QUEUE_REQUIRED"},
	{403, "CROSS_SITE_REQUEST"}, {403, "QUEUE_NOT_OPEN"}, {410, "SOLD_OUT"}, {410, "QUEUE_CLOSED"},
	{403, "INVITE_REQUIRED"}, {404, "INVITE_NOT_FOUND"}, {410, "INVITE_USED"}, {410, "INVITE_EXPIRED"},
	{403, "TURNSTILE_REQUIRED"}, {403, "INVALID_TURNSTILE_TOKEN"}, {409, "INSUFFICIENT_STOCK"}, {404, "PRODUCT_NOT_FOUND"},
	{409, "PURCHASE_IN_PROGRESS"}, {409, "ALREADY_PURCHASED"}, {404, "AUCTION_NOT_FOUND"}, {409, "AUCTION_ENDED"},
	{403, "SELF_BID"}, {400, "INVALID_BID"}, {409, "BID_TOO_LOW"}, {503, "AUCTIONS_SOURCE_UNAVAILABLE"},
	{403, "OPERATION_REFUSED"}, {200, "PERSISTED_QUERY_NOT_FOUND"}, {421, "MISDIRECTED_REQUEST"}, {401, "UNAUTHORIZED"},
	{403, "FORBIDDEN"}, {409, "QUEUE_EXISTS"}, {409, "NOT_SERVED"}, {409, "ALREADY_FINISHED"}, {409, "PRODUCT_EXISTS"},
	{404, "ADMISSION_NOT_FOUND"}, {409, "ALREADY_GIVEN_BACK"}, {409, "RETRY_FAILED"},
}

// refusalFields is every JSON field a refusal can carry (the keys of web.Error.With across edgeq),
// kept complete by the same test.
var refusalFields = []string{
	"ahead", "error", "estimated_wait_time", "field", "highest_amount", "join_url", "joins_from", "opens_at",
	"opens_in", "per_user_limit", "problems", "queue_id", "queue_position", "queue_status", "remaining_stock",
	"request_id", "serving_pos", "serving_position", "starting_price", "state", "wait_url",
}

// RefusalSampleCodes returns the codes (with their statuses) and RefusalSampleFields the field names
// CompileRefusal renders a template with: for the test that keeps them complete.
func RefusalSampleCodes() map[string]int {
	codes := make(map[string]int, len(refusalCodes))
	for _, c := range refusalCodes {
		codes[c.Code] = c.Status
	}
	return codes
}

// RefusalSampleFields: see RefusalSampleCodes.
func RefusalSampleFields() []string { return slices.Clone(refusalFields) }

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
		{Status: 409, Code: "INSUFFICIENT_STOCK", Message: "Sorry, this item is sold out.", Fields: map[string]string{"remaining_stock": "0"}},
	}
	every := func(value string) map[string]string {
		fields := make(map[string]string, len(refusalFields))
		for _, name := range refusalFields {
			fields[name] = value
		}
		return fields
	}
	for i, c := range refusalCodes {
		samples = append(samples,
			RefusalData{Status: c.Status, Code: c.Code, Message: message, Fields: map[string]string{}},
			RefusalData{Status: c.Status, Code: c.Code, Message: message, Fields: every(hostileValue)})
		if i%8 == 0 {
			samples = append(samples, RefusalData{Status: c.Status, Code: c.Code, Message: message, Fields: every(longValue)})
		}
	}
	for _, name := range refusalFields {
		samples = append(samples, RefusalData{Status: 400, Code: "INVALID_REQUEST", Message: message, Fields: map[string]string{name: `}`}})
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

func clipSample(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}
