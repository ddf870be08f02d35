package admission

import (
	"bytes"
	"encoding/json"
	"testing"
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
