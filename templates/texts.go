package templates

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
)

// RegisterTexts adds the strings a part of edgeq keeps beside its own code (an admission kind's
// refusal texts, "msg.CODE" and "head.CODE") to the catalog: dir in fsys holds <tag>.json for every
// language, under the rules of lang/ (English the reference, every key in every language, the same
// fmt verbs). A key the catalog has already is a problem, as is anything wrong with the files, and
// CheckLanguages (so Parse, start-up and `edgeq check`) reports it, naming owner. Call it from an
// init: the catalog is not changed once pages are served.
func RegisterTexts(owner string, fsys fs.FS, dir string) {
	part, err := loadCatalog(fsys, dir, Languages)
	var problems []error
	if err != nil {
		problems = append(problems, err)
	}
	for _, lang := range Languages {
		strs, ok := part[lang]
		if !ok {
			continue
		}
		if catalog[lang] == nil {
			catalog[lang] = map[string]string{}
		}
		for _, key := range slices.Sorted(maps.Keys(strs)) {
			if _, taken := catalog[lang][key]; taken {
				problems = append(problems, fmt.Errorf("%s/%s.json: %s is a key of the catalog already", dir, lang, key))
				continue
			}
			catalog[lang][key] = strs[key]
		}
	}
	if len(problems) > 0 {
		catalogErr = errors.Join(catalogErr, fmt.Errorf("the texts of %s: %w", owner, errors.Join(problems...)))
	}
}
