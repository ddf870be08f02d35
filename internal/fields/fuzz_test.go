package fields

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/edgeq/edgeq/internal/config"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// FuzzFields feeds visitor-controlled requests (content type, body, query, headers) to field
// extraction with every kind of source, JSON paths included. Whatever comes in: no panic, a refusal
// is a 4xx with a code, a found value really is in the request, and the body the origin receives is
// the one the visitor sent, byte for byte.
func FuzzFields(f *testing.F) {
	seeds := []struct{ contentType, body, source string }{
		{"application/x-www-form-urlencoded", "product=1&quantity=2", "form:quantity"},
		{"application/x-www-form-urlencoded", "a=%zz", "form:a"},
		{"multipart/form-data; boundary=xyz", "--xyz\r\nContent-Disposition: form-data; name=\"amount\"\r\n\r\n12.50\r\n--xyz--\r\n", "form:amount"},
		{"application/json", `{"items":[{"sku":"a1","qty":2}]}`, "json:items.0.sku"},
		{"application/json", `{"items":[{"sku":"a1","qty":2}]}`, "json:items.0.qty"},
		{"application/vnd.api+json", `{"a":{"b":null}}`, "json:a.b"},
		{"application/json", `{"a":1} {"b":2}`, "json:a"},
		{"application/json", `[1,2,3]`, "json:1"},
		{"application/json", `{"a":[[["x"]]]}`, "json:a.0.0.0"},
		{"text/plain", "hello", "form:x"},
		{"", "", "query:p"},
		{"", "", "header:X-User"},
		{"", "", "cookie:session"},
		{"application/json", strings.Repeat("[", 600), "json:a"},
		{"application/json", `{"a":"1","A":"2","b":{"\u212a":1,"k":2}}`, "json:a"},
	}
	for _, s := range seeds {
		f.Add(s.contentType, []byte(s.body), s.source, "p=1&p=2", "session=abc; other=1", "alice")
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte, sourceText, query, cookie, user string) {
		src, err := config.ParseFieldSource(sourceText)
		if err != nil {
			return // not a source an operator could configure
		}
		const limit = 4096
		r := httptest.NewRequest("POST", "/checkout", bytes.NewReader(body))
		r.URL.RawQuery = query
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		r.Header.Set("Cookie", cookie)
		r.Header.Set("X-User", user)
		fl := New(r, limit)
		value, found, e := fl.Get(src)
		if e != nil {
			if e.Status < 400 || e.Status > 499 || e.Code == "" {
				t.Fatalf("%s on %q: error %v is not a visitor error with a code", sourceText, body, e)
			}
			if found || value != "" {
				t.Fatalf("%s: error %v with a value %q", sourceText, e, value)
			}
		}
		// The origin's copy of the body is untouched (when it was read at all and under the limit).
		if fl.read && len(body) <= limit {
			got, rerr := io.ReadAll(r.Body)
			if rerr != nil || !bytes.Equal(got, body) {
				t.Fatalf("body changed on its way to the origin: %q -> %q (%v)", body, got, rerr)
			}
		}
		// A second lookup answers the same without reading the body again.
		value2, found2, e2 := fl.Get(src)
		if value2 != value || found2 != found || (e2 == nil) != (e == nil) {
			t.Fatalf("%s: second lookup %q %v %v, first %q %v %v", sourceText, value2, found2, e2, value, found, e)
		}
	})
}

// FuzzLookupJSON walks arbitrary documents with arbitrary dotted paths: no panic, and a found value is
// a string or number of the document.
func FuzzLookupJSON(f *testing.F) {
	f.Add(`{"items":[{"sku":"a1","qty":2}]}`, "items.0.sku")
	f.Add(`{"a":{"b":[1,{"c":"d"}]}}`, "a.b.1.c")
	f.Add(`[0,1]`, "99999999999999999999")
	f.Add(`{"":{"":"x"}}`, ".")
	f.Add(`{"a":true}`, "a")
	f.Fuzz(func(t *testing.T, doc, path string) {
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		value, found, err := lookupJSON(v, strings.Split(path, "."))
		if err != nil && found {
			t.Fatalf("error %v and found", err)
		}
		if !found {
			return
		}
		// The value is one of the document's strings or numbers: re-encoded, it appears in the
		// re-encoded document (numbers keep their literal with UseNumber).
		canonical, _ := json.Marshal(v)
		quoted, _ := json.Marshal(value)
		if !bytes.Contains(canonical, quoted) && !bytes.Contains(canonical, []byte(value)) {
			t.Fatalf("found %q, which is not in %s", value, canonical)
		}
	})
}

// FuzzIdentity: the identity normaliser never panics, answers valid UTF-8 or a 400 naming the user
// field, is idempotent for values that are not decoded again, and merges ASCII letter case and
// surrounding white space.
func FuzzIdentity(f *testing.F) {
	for _, s := range []string{"dave", "%64ave", "D%41VE", " dave ", "+", "%", "%zz", "Straße", "STRASSE", "é", "e\u0301",
		"\u212a", "\xff\xfe", "", "seller%2Dsession", "ǅ"} {
		f.Add(s, "cookie")
		f.Add(s, "header")
	}
	f.Fuzz(func(t *testing.T, raw, kind string) {
		id, e := Identity(raw, kind)
		if e != nil {
			if e.Status != 400 || e.Fields["field"] != "user" {
				t.Fatalf("Identity(%q, %q): refusal %v", raw, kind, e)
			}
			return
		}
		if id == "" || strings.TrimSpace(id) != id {
			t.Fatalf("Identity(%q, %q) = %q: empty or not trimmed", raw, kind, id)
		}
		if utf8.ValidString(raw) && !utf8.ValidString(id) && kind != "cookie" {
			t.Fatalf("Identity(%q, %q) = %q is not UTF-8", raw, kind, id)
		}
		if again, e := Identity(id, "header"); e != nil || again != id {
			t.Fatalf("Identity(%q) = %q, but again %q %v", raw, id, again, e)
		}
		if isASCII(raw) && kind == "header" {
			// The ASCII fast path agrees with the full normalisation.
			if full := norm.NFC.String(cases.Fold().String(norm.NFC.String(strings.TrimSpace(raw)))); full != id {
				t.Fatalf("Identity(%q) = %q, full normalisation %q", raw, id, full)
			}
			for _, variant := range []string{strings.ToUpper(raw), strings.ToLower(raw), " " + raw + "\t"} {
				if v, e := Identity(variant, kind); e != nil || v != id {
					t.Fatalf("Identity(%q) = %q but Identity(%q) = %q %v", raw, id, variant, v, e)
				}
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// FuzzSpelling: a form carrying a field under two names is refused exactly when some framework reads
// both names as the same field (formSpelling), and otherwise the field's own value is read; the
// spelling of a spelling is itself.
func FuzzSpelling(f *testing.F) {
	for _, pair := range [][2]string{{"quantity", "QUANTITY"}, {"quantity", "quantity[]"}, {"q_ty", "q.ty"}, {"q_ty", "q ty"},
		{"qty", "qty2"}, {"a", "b"}, {"sku", "\u017fku"}, {"k", "\u212a"}, {"x", " x"}, {"x[0]", "x"}} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, name, other string) {
		if s := formSpelling(name); formSpelling(s) != s {
			t.Fatalf("formSpelling(%q) = %q, but formSpelling of that is %q", name, s, formSpelling(s))
		}
		if got, want := sameForm(other, formSpelling(name)), formSpelling(other) == formSpelling(name); got != want {
			t.Fatalf("sameForm(%q, spelling of %q) = %v, spellings say %v", other, name, got, want)
		}
		slow := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }
		if got, want := sameHeader(name, other), slow(name) == slow(other) && isASCII(name) && isASCII(other); isASCII(name) && isASCII(other) && got != want {
			t.Fatalf("sameHeader(%q, %q) = %v, want %v", name, other, got, want)
		}
		src, err := config.ParseFieldSource("form:" + name)
		if err != nil || name == other {
			return
		}
		body := url.Values{name: {"1"}, other: {"2"}}.Encode()
		r := httptest.NewRequest("POST", "/checkout", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		value, found, e := New(r, 1<<16).Get(src)
		if formSpelling(name) == formSpelling(other) {
			if e == nil {
				t.Fatalf("form %q: %s read %q %v although %q is the same field to some framework", body, src, value, found, other)
			}
			return
		}
		if e != nil || !found || value != "1" {
			t.Fatalf("form %q: %s read %q %v %v, want 1", body, src, value, found, e)
		}
	})
}
