package fields

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"
)

func TestDuplicateKey(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a":1,"a":2}`:                              "a",
		`{"a":{"b":1,"b":2}}`:                        "b",
		`{"a":[1,{"x":1,"x":2}]}`:                    "x",
		`{"k":[],"k2":{},"k":1}`:                     "k",
		`{"items":[{"sku":"1","qty":1}],"items":[]}`: "items",
		`{"a":{"b":1},"b":2}`:                        "",
		`[{"a":1},{"a":2}]`:                          "",
		`{"a":"a","b":"a"}`:                          "",
		`{"a":["a","a"],"b":{"a":"b"}}`:              "",
		`"str"`:                                      "",
		`{}`:                                         "",
		`{"a":1,"b":{"c":[{"d":1}],"e":2},"a2":3}`:   "",
		`{"amount":"1.00","AMOUNT":"99999.00"}`:      "AMOUNT",
		"{\"key\":1,\"\u212aey\":2}":                 "\u212aey",
		`{"a\"b":1,"a\u0022b":2}`:                    "a\"b",
		`{"s":1,"\u017f":2}`:                         "\u017f",
		`{"x":"\\","y":"\"","x2":1}`:                 "",
		`{ "a" : 1 , "b" : { "a" : 2 } }`:            "",
		"{\n\t\"a\"\t:\r\n1,\"A\"\n:2}":              "A",
		"0}":                                         "", // not valid JSON: parseJSON refuses it first, and this must not panic
		"]]}":                                        "",
		"{\"\x9e\":0,\"\xbf\":0}":                    "\ufffd", // encoding/json reads broken UTF-8 as U+FFFD: one key
		"{\"a\x9e\":0,\"a\xbf\xbf\":0}":              "",       // one U+FFFD per broken byte: two keys
	} {
		key, dup := duplicateKey([]byte(doc))
		if dup != (want != "") || key != want {
			t.Errorf("duplicateKey(%s) = %q, %v; want %q", doc, key, dup, want)
		}
	}
}

// duplicateKeyByTokens is a slow, obviously correct duplicateKey for valid JSON: it walks the
// decoder's tokens.
func duplicateKeyByTokens(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		keys      map[string]bool
		expectKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if key, ok := tok.(string); ok && top != nil && top.keys != nil && top.expectKey {
			if top.keys[foldKey(key)] {
				return key, true
			}
			top.keys[foldKey(key)] = true
			top.expectKey = false
			continue
		}
		if top != nil && top.keys != nil {
			top.expectKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// FuzzDuplicateKey: the byte scan never panics, and on valid JSON it agrees with the token walk.
func FuzzDuplicateKey(f *testing.F) {
	f.Add(`{"a":1,"A":2}`)
	f.Add(`{"a":{"b":[{"c":1,"c":2}]},"b":"a"}`)
	f.Add(`{"a\"b":"\\","a\u0022b":1}`)
	f.Add(`[{"k":1},{"\u212a":2}]`)
	f.Add(`0}`)
	f.Add("{\"\x9e\":0,\"\xbf\":0}")
	f.Fuzz(func(t *testing.T, doc string) {
		key, dup := duplicateKey([]byte(doc))
		if !json.Valid([]byte(doc)) {
			return
		}
		wantKey, wantDup := duplicateKeyByTokens([]byte(doc))
		if dup != wantDup || key != wantKey {
			t.Fatalf("duplicateKey(%s) = %q %v, token walk says %q %v", doc, key, dup, wantKey, wantDup)
		}
	})
}

func jsonNumber(s string) json.Number { return json.Number(s) }

func TestFields_JSONPaths(t *testing.T) {
	doc := map[string]any{"items": []any{map[string]any{"sku": "a1", "qty": jsonNumber("2")}}, "flag": true}
	cases := []struct {
		path  string
		value string
		found bool
		err   bool
	}{
		{"items.0.sku", "a1", true, false},
		{"items.0.qty", "2", true, false},
		{"items.1.sku", "", false, false},
		{"items.x", "", false, false},
		{"items.-1", "", false, false},
		{"nope", "", false, false},
		{"flag", "", false, true},
		{"items", "", false, true},
	}
	for _, c := range cases {
		v, found, err := lookupJSON(doc, strings.Split(c.path, "."))
		if v != c.value || found != c.found || (err != nil) != c.err {
			t.Errorf("%s: %q %v %v", c.path, v, found, err)
		}
	}
}

// The admin API's JSON bodies are read as strictly as admission fields: a key twice (in any case),
// data after the object, unknown fields and oversized bodies are refused; the error names the field
// when there is one to name.
func TestDecodeJSON_IsStrict(t *testing.T) {
	type body struct {
		Amount *int64 `json:"amount"`
	}
	cases := []struct {
		body   string
		status int
		field  string // the field the error names, if any
	}{
		{`{"amount": 3}`, 0, ""},
		{`{"amount": 3} `, 0, ""},
		{`{"amount": 3}}`, 400, ""},
		{`{"amount": 3} {"amount": 4}`, 400, ""},
		{`{"amount": 3, "AMOUNT": 400}`, 400, "AMOUNT"},
		{`{"amount": 3, "other": 1}`, 400, "other"},
		{`{"amount": 3, "o\"ther": 1}`, 400, `o"ther`},
		{`{"amount": "3"}`, 400, "amount"},
		{`{"amount": ` + strings.Repeat("1", 100) + `}`, 400, "amount"},
		{`{"amount": 3, "pad": "` + strings.Repeat("x", 200) + `"}`, 413, ""},
	}
	for _, c := range cases {
		r := httptest.NewRequest("POST", "/api/x", strings.NewReader(c.body))
		var v body
		e := DecodeJSON(httptest.NewRecorder(), r, 128, &v)
		got, field := 0, ""
		if e != nil {
			got = e.Status
			field, _ = e.Fields["field"].(string)
		}
		if got != c.status || field != c.field {
			t.Errorf("%.60s: status %d, field %q; want %d, %q (%v)", c.body, got, field, c.status, c.field, e)
		}
	}
}

// Body reads a top-level field from a JSON object or a form, whichever the request carries, with the
// same refusals as admission fields.
func TestBody_FormOrJSON(t *testing.T) {
	cases := []struct {
		contentType, body string
		value             string
		status            int
	}{
		{"application/json", `{"queue_id":"drop"}`, "drop", 0},
		{"application/json", `{"queue_id":7}`, "7", 0},
		{"application/json", `{"queue_id":"drop","Queue_Id":"other"}`, "", 400},
		{"application/json", `{"queue_id":"drop"}]`, "", 400},
		{"application/json", `{"queue_id":{"a":1}}`, "", 400},
		{"application/x-www-form-urlencoded", "queue_id=drop", "drop", 0},
		{"application/x-www-form-urlencoded", "queue_id=drop&queue_id=other", "", 400},
		{"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"queue_id\"\r\n\r\ndrop\r\n--b--\r\n", "drop", 0},
		{"text/plain", "queue_id=drop", "", 0},
		{"", "", "", 0},
	}
	for _, c := range cases {
		r := httptest.NewRequest("POST", "/_edgeq/assign_queue_pos", strings.NewReader(c.body))
		if c.contentType != "" {
			r.Header.Set("Content-Type", c.contentType)
		}
		v, _, e := New(r, 1024).Body("queue_id")
		got := 0
		if e != nil {
			got = e.Status
		}
		if v != c.value || got != c.status {
			t.Errorf("%s %q: %q status %d, want %q %d (%v)", c.contentType, c.body, v, got, c.value, c.status, e)
		}
	}
}

// PHP's $_REQUEST (with request_order unset, variables_order "GPCS": a cookie
// overrides the query and the body) and classic ASP.NET's Request[name] (query, form, then cookies)
// merge cookies with form and query fields. A form: or query: field whose name a cookie also carries,
// in any spelling those read alike, is refused as ambiguous; a JSON body is not merged with cookies.
func TestCookies_NamedLikeAFormOrQueryFieldAreAmbiguous(t *testing.T) {
	const form = "application/x-www-form-urlencoded"
	cases := []struct {
		name            string
		source          config.FieldSource
		query, ct, body string
		cookie          string
		value           string
		status          int
	}{
		{"form field and a cookie of its name", config.FieldSource{Kind: "form", Name: "sku"}, "", form, "sku=unguarded-x", "sku=42", "", 400},
		{"form field absent, a cookie of its name", config.FieldSource{Kind: "form", Name: "sku"}, "", form, "qty=1", "sku=42", "", 400},
		{"cookie name in another case", config.FieldSource{Kind: "form", Name: "sku"}, "", form, "sku=x", "SKU=42", "", 400},
		{"cookie name percent-encoded", config.FieldSource{Kind: "form", Name: "sku"}, "", form, "sku=x", "s%6Bu=42", "", 400},
		{"cookie name as an array", config.FieldSource{Kind: "form", Name: "sku"}, "", form, "sku=x", "sku[0]=42", "", 400},
		{"cookie name with a dot for an underscore", config.FieldSource{Kind: "form", Name: "product_id"}, "", form, "product_id=x", "product.id=42", "", 400},
		{"cookie among others", config.FieldSource{Kind: "form", Name: "sku"}, "", form, "sku=x", "a=1; sku=42; b=2", "", 400},
		{"query field and a cookie of its name", config.FieldSource{Kind: "query", Name: "sku"}, "sku=x", "", "", "sku=42", "", 400},
		{"form field, other cookies", config.FieldSource{Kind: "form", Name: "sku"}, "", form, "sku=x", "session=s1; skus=1; sk=2", "x", 0},
		{"query field, other cookies", config.FieldSource{Kind: "query", Name: "sku"}, "sku=x", "", "", "session=s1", "x", 0},
		{"JSON field and a cookie of its name", config.FieldSource{Kind: "json", Name: "sku"}, "", "application/json", `{"sku":"x"}`, "sku=42", "x", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/cart?"+c.query, strings.NewReader(c.body))
			if c.ct != "" {
				r.Header.Set("Content-Type", c.ct)
			}
			r.Header.Set("Cookie", c.cookie)
			v, _, e := New(r, 1024).Get(c.source)
			got, field := 0, ""
			if e != nil {
				got = e.Status
				field, _ = e.Fields["field"].(string)
			}
			if v != c.value || got != c.status {
				t.Fatalf("%q status %d, want %q %d (%v)", v, got, c.value, c.status, e)
			}
			if got == 400 && (field != c.source.Name || e.Code != "INVALID_REQUEST") {
				t.Fatalf("refusal %s names field %q, want %q", e.Code, field, c.source.Name)
			}
		})
	}
}

// A field quoted in an answer is clipped at ValueMax bytes, with "..." and no broken rune (web.Clip).
func TestClip_ValueMaxBytes(t *testing.T) {
	if got := Clip(strings.Repeat("a", ValueMax)); got != strings.Repeat("a", ValueMax) {
		t.Fatalf("a value of ValueMax bytes was clipped: %q", got)
	}
	if got, want := Clip(strings.Repeat("a", ValueMax-1)+"é"), strings.Repeat("a", ValueMax-1)+"..."; got != want {
		t.Fatalf("Clip = %q, want %q", got, want)
	}
}
