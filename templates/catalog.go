package templates

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Languages the built-in pages speak, English first. Each has its strings in lang/<tag>.json: one flat
// JSON object of key -> string, English being the reference every other file must match key for key.
// Operator templates may use the same keys.
var Languages = []string{
	"en", "zh-TW", "zh-CN", "ja", "ko", "es", "fr", "de", "pt-BR",
	"it", "nl", "pl", "tr", "id", "th", "vi", "ar", "he",
}

// rightToLeft are the languages written from right to left (<html dir="rtl">).
var rightToLeft = map[string]bool{"ar": true, "he": true}

//go:embed lang/*.json
var langFiles embed.FS

// catalog holds every built-in string by language, read from lang/ once when the package is loaded and
// never changed after. catalogErr is what is wrong with those files (nil when nothing is); Parse
// returns it, so a broken file stops start-up and `edgeq check` instead of showing a visitor a raw
// key or a garbled "%!d(MISSING)".
var catalog, catalogErr = loadCatalog(langFiles, "lang", Languages)

// CheckLanguages reports every problem of the built-in language files: a file that is not a flat JSON
// object of strings, a language whose file is missing, a key missing from a language or unknown to
// English, an empty string, and a string whose fmt verbs (%d, %s) differ from English's in number or
// order. Each problem names the file and the key.
func CheckLanguages() error { return catalogErr }

// loadCatalog reads dir/<tag>.json of every language from fsys. It returns what it could read (a
// language with a broken file is absent, and falls back to English) and every problem found.
func loadCatalog(fsys fs.FS, dir string, languages []string) (map[string]map[string]string, error) {
	var problems []error
	catalog := make(map[string]map[string]string, len(languages))
	for _, lang := range languages {
		name := path.Join(dir, lang+".json")
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			problems = append(problems, err) // it names the file
			continue
		}
		strs, err := parseStrings(b)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", name, err))
			continue
		}
		catalog[lang] = strs
	}
	// A file nobody lists would be silently ignored.
	files, _ := fs.Glob(fsys, path.Join(dir, "*.json"))
	for _, f := range files {
		if tag := strings.TrimSuffix(path.Base(f), ".json"); !slices.Contains(languages, tag) {
			problems = append(problems, fmt.Errorf("%s: %q is not in templates.Languages", f, tag))
		}
	}
	if en, ok := catalog["en"]; ok {
		for _, lang := range languages {
			if strs, ok := catalog[lang]; ok {
				problems = append(problems, compareWithEnglish(dir, lang, strs, en)...)
			}
		}
	}
	return catalog, errors.Join(problems...)
}

// parseStrings reads one language file: a single JSON object whose values are all strings. Unlike
// json.Unmarshal into a map it refuses a key given twice (the second would silently win) and anything
// after the object.
func parseStrings(b []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object of key -> string (%v)", orToken(err, tok))
	}
	strs := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("after %d keys: %w", len(strs), err)
		}
		key := tok.(string) // inside an object, the decoder only returns string keys
		var value any
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		s, ok := value.(string)
		if !ok {
			return nil, fmt.Errorf("%s: the value is not a string (%T)", key, value)
		}
		if _, dup := strs[key]; dup {
			return nil, fmt.Errorf("%s: given twice", key)
		}
		strs[key] = s
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("after %d keys: %w", len(strs), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more after the object (%v)", orToken(err, nil))
	}
	return strs, nil
}

func orToken(err error, tok json.Token) any {
	if err != nil {
		return err
	}
	return tok
}

// compareWithEnglish lists what lang's strings lack, add or change compared with English.
func compareWithEnglish(dir, lang string, strs, en map[string]string) []error {
	var problems []error
	file := path.Join(dir, lang+".json")
	for _, key := range slices.Sorted(maps.Keys(en)) {
		s, ok := strs[key]
		switch {
		case !ok:
			problems = append(problems, fmt.Errorf("%s: lacks %s", file, key))
		case strings.TrimSpace(s) == "":
			problems = append(problems, fmt.Errorf("%s: %s is empty", file, key))
		case !slices.Equal(verbs(s), verbs(en[key])):
			problems = append(problems, fmt.Errorf("%s: %s has the verbs %v, English has %v", file, key, verbs(s), verbs(en[key])))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(strs)) {
		if _, ok := en[key]; !ok {
			problems = append(problems, fmt.Errorf("%s: %s is not a key of %s", file, key, path.Join(dir, "en.json")))
		}
	}
	return problems
}

// verb matches a fmt verb with its flags, width and precision; "%%" is a literal percent sign.
var verb = regexp.MustCompile(`%[-+# 0]*(\[[0-9]+\])?[0-9]*(\.[0-9]*)?[a-zA-Z%]`)

// verbs lists s's fmt verbs in order, without "%%". A percent sign no verb accounts for (one at the
// very end) counts as a verb of its own, so a stray one does not pass unnoticed.
func verbs(s string) []string {
	var out []string
	consumed := 0
	for _, v := range verb.FindAllString(s, -1) {
		consumed += strings.Count(v, "%")
		if v != "%%" {
			out = append(out, v)
		}
	}
	if strings.Count(s, "%") > consumed {
		out = append(out, "%")
	}
	return out
}
