package admission

import "testing"

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
	} {
		key, dup := duplicateKey([]byte(doc))
		if dup != (want != "") || key != want {
			t.Errorf("duplicateKey(%s) = %q, %v; want %q", doc, key, dup, want)
		}
	}
}
