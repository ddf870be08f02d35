package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed THIRD_PARTY_LICENSES.md is what the generator writes today: a module added, removed or
// upgraded in go.mod (or a package newly linked) without `make licenses` fails here. The go command
// lists the packages and downloads any module missing from the cache.
func TestThirdPartyLicenses_CommittedFileIsUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	out := filepath.Join(t.TempDir(), "THIRD_PARTY_LICENSES.md")
	if err := run(root, out, nil); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "THIRD_PARTY_LICENSES.md"))
	if err != nil {
		t.Fatalf("%v: run make licenses", err)
	}
	if !bytes.Equal(got, want) {
		gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gotLines), len(wantLines)); i++ {
			var g, w string
			if i < len(gotLines) {
				g = gotLines[i]
			}
			if i < len(wantLines) {
				w = wantLines[i]
			}
			if g != w {
				t.Fatalf("THIRD_PARTY_LICENSES.md is out of date with go.mod (run make licenses and commit it); "+
					"first difference at line %d:\n committed: %q\n generated: %q", i+1, g, w)
			}
		}
	}
}

func writeFiles(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("text of "+name+"\r\n  \n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLicenceFiles_TheTermsAtTheModulesRoot(t *testing.T) {
	dir := writeFiles(t, "LICENSE", "LICENSE.txt", "LICENCE-MIT", "COPYING", "NOTICE.md", "PATENTS", "license.go",
		"licensed.txt", "README.md", "go.mod")
	os.Mkdir(filepath.Join(dir, "LICENSES"), 0o755)
	names, err := licenceFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, " "); got != "COPYING LICENCE-MIT LICENSE LICENSE.txt NOTICE.md PATENTS" {
		t.Errorf("licence files %s", got)
	}
}

func TestReadLicences_AModuleWithoutALicenceFileIsAnErrorNamingIt(t *testing.T) {
	licensed := module{Path: "example.com/licensed", Version: "v1.0.0", Dir: writeFiles(t, "LICENSE")}
	bare := module{Path: "example.com/bare", Version: "v0.2.0", Dir: writeFiles(t, "README.md")}
	_, err := readLicences([]module{licensed, bare})
	if err == nil || !strings.Contains(err.Error(), "example.com/bare v0.2.0") || strings.Contains(err.Error(), "licensed") {
		t.Fatalf("error %v, want one naming example.com/bare alone", err)
	}
	entries, err := readLicences([]module{licensed})
	if err != nil || len(entries) != 1 || entries[0].files[0].text != "text of LICENSE" {
		t.Fatalf("%+v, %v", entries, err)
	}
}

func TestWrite_TextsFencedSoNothingInsideClosesThem(t *testing.T) {
	var b bytes.Buffer
	write(&b, []entry{{module: module{Path: "example.com/m", Version: "v1.2.3"},
		files: []file{{name: "LICENSE", text: "Permission is hereby granted, free of\ncharge ```not a fence``` ok"}}}})
	out := b.String()
	for _, want := range []string{
		"| [example.com/m](#examplecomm) | v1.2.3 | MIT | LICENSE |",
		"\n## example.com/m\n\nv1.2.3\n",
		"\n````text\nPermission is hereby granted, free of\ncharge ```not a fence``` ok\n````\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestLicenceKind_ByWording(t *testing.T) {
	for text, want := range map[string]string{
		"Apache License\n   Version 2.0, January 2004":                                                         "Apache-2.0",
		"Permission is hereby granted, free of charge, to any person":                                          "MIT",
		"Redistribution and use in source and binary forms ... used to endorse or promote products":            "BSD-3-Clause",
		"Redistribution and use in source and binary forms, with or without\nmodification, are permitted":      "BSD-2-Clause",
		"Mozilla Public License Version 2.0\n==================================":                               "MPL-2.0",
		"Permission to use, copy, modify, and/or distribute this software for any purpose with or without fee": "ISC",
		"released into the public domain with CC0 1.0.\n\nCC0 1.0 Universal":                                   "CC0-1.0",
		"All rights reserved; ask us.":                                                                         "see the text",
	} {
		if got := licenceKind(text); got != want {
			t.Errorf("licenceKind(%q) = %s, want %s", text, got, want)
		}
	}
}
