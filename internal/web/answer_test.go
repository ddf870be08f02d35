package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"text/template"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
)

func outcome(t *testing.T, answer string, encoding string, key string, batch int) *Outcome {
	t.Helper()
	body := []byte(answer)
	if encoding == "gzip" {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	return &Outcome{Forwarded: true, Status: 200, Answer: &Answer{Want: true, Body: body, Encoding: encoding,
		Whole: true, FieldKey: key, Batch: batch}}
}

func answerOutcome(t *testing.T, text string) config.ReleaseOutcome {
	t.Helper()
	o, err := config.ParseReleaseOutcome(text)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// answer:PATH matches a value that is not null, false, 0, "", [] or {}; $field is the matched field's
// response key, in the batch element of a batched request; a gzip answer is read decompressed.
func TestOutcome_AnswerPaths(t *testing.T) {
	refused := `{"data":{"add":{"__typename":"InsufficientStockError","errorCode":"INSUFFICIENT_STOCK_ERROR"}}}`
	added := `{"data":{"add":{"__typename":"Order","id":"7","errorCode":null}}}`
	cases := []struct {
		name, answer, encoding, key string
		batch                       int
		path                        string
		want                        bool
	}{
		{"error result", refused, "", "add", -1, "answer:data.$field.errorCode", true},
		{"error result, gzip", refused, "gzip", "add", -1, "answer:data.$field.errorCode", true},
		{"success", added, "", "add", -1, "answer:data.$field.errorCode", false},
		{"another alias", refused, "", "other", -1, "answer:data.$field.errorCode", false},
		{"errors", `{"errors":[{"message":"x"}],"data":null}`, "", "add", -1, "answer:errors", true},
		{"empty errors", `{"errors":[],"data":{}}`, "", "add", -1, "answer:errors", false},
		{"false", `{"ok":false}`, "", "", -1, "answer:ok", false},
		{"zero", `{"n":0}`, "", "", -1, "answer:n", false},
		{"empty string", `{"s":""}`, "", "", -1, "answer:s", false},
		{"empty object", `{"o":{}}`, "", "", -1, "answer:o", false},
		{"true", `{"ok":true}`, "", "", -1, "answer:ok", true},
		{"array index", `{"errors":[{"message":"x"}]}`, "", "", -1, "answer:errors.0.message", true},
		{"batch element", `[{"data":{"p":[]}},` + refused + `]`, "", "add", 1, "answer:data.$field.errorCode", true},
		{"other batch element", `[` + refused + `,{"data":{"add":{}}}]`, "", "add", 1, "answer:data.$field.errorCode", false},
		{"not JSON", `<html>`, "", "add", -1, "answer:errors", false},
		{"unknown encoding", refused, "br", "add", -1, "answer:data.$field.errorCode", false},

		// answer:!PATH: the answer is JSON and has nothing there (absent or null).
		{"absent: the field's data null beside errors", `{"errors":[{"message":"Variable \"$q\" got invalid value \"2\""}],"data":null}`, "", "add", -1, "answer:!data.$field", true},
		{"absent: the field null", `{"errors":[{"message":"x"}],"data":{"add":null}}`, "", "add", -1, "answer:!data.$field", true},
		{"absent: no data at all", `{"errors":[{"message":"x"}]}`, "", "add", -1, "answer:!data.$field", true},
		{"absent: the field present", added, "", "add", -1, "answer:!data.$field", false},
		{"absent: an error result is a value", refused, "", "add", -1, "answer:!data.$field", false},
		{"absent: under another alias", refused, "", "other", -1, "answer:!data.$field", true},
		{"absent: false is a value", `{"data":{"add":false}}`, "", "add", -1, "answer:!data.$field", false},
		{"absent: the batch element lacks it", `[{"data":{"p":[]}},{"errors":[{"message":"x"}]}]`, "", "add", 1, "answer:!data.$field", true},
		{"absent: a batch answered with one error", `{"errors":[{"message":"batching is disabled"}]}`, "", "add", 1, "answer:!data.$field", true},
		{"absent: not JSON says nothing", `<html>`, "", "add", -1, "answer:!data.$field", false},
		{"absent: unknown encoding says nothing", `{}`, "br", "add", -1, "answer:!data.$field", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := outcome(t, c.answer, c.encoding, c.key, c.batch)
			if got := o.Matches(answerOutcome(t, c.path)); got != c.want {
				t.Errorf("%s on %s: %v, want %v", c.path, c.answer, got, c.want)
			}
		})
	}
	// An answer that was not kept whole matches nothing.
	o := outcome(t, refused, "", "add", -1)
	o.Answer.Whole = false
	if o.Matches(answerOutcome(t, "answer:data.$field.errorCode")) {
		t.Error("a partial answer matched")
	}
	if o.Matches(answerOutcome(t, "answer:!data.$field")) {
		t.Error("a partial answer matched the absence of the field")
	}
	// Status outcomes still read the status.
	o = outcome(t, refused, "", "add", -1)
	o.Status = 503
	if !o.Matches(answerOutcome(t, "5xx")) || o.Matches(answerOutcome(t, "4xx")) {
		t.Error("status outcomes")
	}
}

// Refusals on a graphql: route are GraphQL-shaped; refusal.status replaces a 4xx status (never a 5xx,
// whose Retry-After stays); a refusal.json template still wins; PERSISTED_QUERY_NOT_FOUND is always the
// shape automatic persisted query clients read.
func TestError_GraphQLShapeAndRefusalStatus(t *testing.T) {
	rs := responder(t)
	answer := func(info *Request, e *Error) (int, map[string]any, string) {
		r := httptest.NewRequest("POST", "/shop-api", nil)
		r.Header.Set("Content-Type", "application/json")
		r = r.WithContext(WithRequest(r.Context(), info))
		rec := httptest.NewRecorder()
		rs.Error(rec, r, e)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v", rec.Body, err)
		}
		return rec.Code, body, rec.Header().Get("Retry-After")
	}
	// Refusals as an admission kind defines them (NewError), with the codes of stock and bid.
	insufficientStock := NewError(vocab.Code{Status: 409, Name: "INSUFFICIENT_STOCK"}, "Sorry, this item is sold out.")
	bidTooLow := NewError(vocab.Code{Status: 409, Name: "BID_TOO_LOW"}, "Your bid must beat the highest bid.")
	status, body, _ := answer(&Request{GraphQL: true}, insufficientStock.With("remaining_stock", 0))
	errs, _ := body["errors"].([]any)
	if status != 409 || body["data"] != nil || len(errs) != 1 {
		t.Fatalf("GraphQL refusal: %d %v", status, body)
	}
	first := errs[0].(map[string]any)
	ext := first["extensions"].(map[string]any)
	if first["message"] != insufficientStock.Message || ext["code"] != "INSUFFICIENT_STOCK" || ext["remaining_stock"] != float64(0) {
		t.Errorf("GraphQL refusal body: %v", body)
	}
	if _, has := body["data"]; !has {
		t.Error("no data: null")
	}

	status, body, _ = answer(&Request{GraphQL: true, RefusalStatus: 200}, insufficientStock)
	if status != 200 || body["errors"] == nil {
		t.Errorf("refusal.status 200: %d %v", status, body)
	}
	status, _, retry := answer(&Request{GraphQL: true, RefusalStatus: 200}, ErrStoreUnavailable)
	if status != 503 || retry == "" {
		t.Errorf("a 503 under refusal.status: %d, Retry-After %q", status, retry)
	}
	status, body, _ = answer(&Request{RefusalStatus: 422}, ErrQueueRequired)
	if status != 422 || body["error"] != "QUEUE_REQUIRED" {
		t.Errorf("refusal.status on a standard body: %d %v", status, body)
	}
	tmpl := template.Must(template.New("r").Parse(`{"problem":"{{.Code}}"}`))
	status, body, _ = answer(&Request{GraphQL: true, Refusal: tmpl, RefusalStatus: 200}, bidTooLow)
	if status != 200 || body["problem"] != "BID_TOO_LOW" {
		t.Errorf("refusal.json on a graphql: route: %d %v", status, body)
	}
	status, body, _ = answer(&Request{GraphQL: true, Refusal: tmpl, RefusalStatus: 409}, ErrPersistedQueryNotFound)
	errs, _ = body["errors"].([]any)
	if status != 200 || len(errs) != 1 || errs[0].(map[string]any)["message"] != "PersistedQueryNotFound" {
		t.Errorf("PERSISTED_QUERY_NOT_FOUND: %d %v", status, body)
	}
}
