package deploy

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// citation matches a line that points at a document the repository does not hold: the project's
// issues (a number after "issue", "issues" or "issue #"), its seed documents (a number after "seed"
// or "seed-", not a command-line -seed flag), the sections of its design contract (a number after "contract" or
// "contract section", or the contract's file name in capitals) and its acceptance points (a number
// after "acceptance" or "acceptance point"). A third party's bug is cited by its own address or
// owner/repo#N, which this does not match. The contract's name is spelled with a class so that this
// file does not match itself.
var citation = regexp.MustCompile(`(?i:\bissues? #?[0-9]+|(?:^|[^\w-])seeds?[ -]#?[0-9]+|\bcontract(?: section)? §?[0-9]+|` +
	`\bacceptance(?: points?)? #?[0-9]+)|\bC[O]NTRACT\b`)

// citationSkip names what the walk leaves out: directories of third-party or built files (the
// module's .gitignore: bin, dist, node_modules), the repository's own metadata (.git, a directory or,
// in a worktree, a file), third-party licence texts, and the build outputs .gitignore names.
func citationSkip(d fs.DirEntry) bool {
	name := d.Name()
	if d.IsDir() {
		return name == ".git" || name == "node_modules" || name == "bin" || name == "dist"
	}
	return name == ".git" || name == "THIRD_PARTY_LICENSES.md" || name == "edgeq-bench" ||
		strings.HasSuffix(name, ".test") || strings.HasSuffix(name, ".out")
}

// citations walks root and returns every line of a text file (valid UTF-8, no NUL byte) that
// citation matches, as "path:line: text" with the path slash-separated and relative to root, and
// the number of text files it read.
func citations(t *testing.T, root string) (found []string, files int) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != root && citationSkip(d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
			return nil // an image, a binary
		}
		files++
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if citation.MatchString(line) {
				found = append(found, filepath.ToSlash(rel)+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	return found, files
}

// The repository cites nothing it does not hold: a reader of a comment, a test, a doc page or a
// benchmark's output cannot open the project's issue tracker, seed documents or design contract, so
// a rule is stated where it applies or linked to the docs page that states it (docs/reference.md,
// docs/security.md, docs/benchmarks.md, ...), never justified by a number of those.
func TestRepository_CitesNothingItDoesNotHold(t *testing.T) {
	found, files := citations(t, "..")
	if _, err := os.Stat("../go.mod"); err != nil || files < 200 {
		t.Fatalf("read only %d text files (go.mod: %v): is .. the module's root?", files, err)
	}
	for _, f := range found {
		t.Errorf("%s\n\tcites a document this repository does not hold: keep the sentence's meaning without "+
			"the citation, or link the docs section that states the rule", f)
	}
}

// The pattern finds each kind of citation and leaves ordinary words, command-line seeds and a third
// party's bug alone. The citations are put together here so that this file does not cite anything.
func TestCitation_MatchesCitationsOnly(t *testing.T) {
	issue, seed, contract, acceptance := "Issue", "seed", "CONTRA"+"CT", "Acceptance"
	for _, line := range []string{
		"// " + issue + " 7, " + strings.ToLower(acceptance) + " 1: Redis is killed",
		"(" + strings.ToLower(issue) + " 33)",
		strings.ToLower(issue) + " #12",
		strings.ToLower(issue) + "s 49 and 50",
		"under " + seed + " 003's target",
		"a " + seed + "-004 form",
		contract + " 12.6",
		strings.ToLower(contract) + " section 4",
		"the design document " + contract + ".md",
		acceptance + " 17.4: stock 20",
		strings.ToLower(acceptance) + " point 3",
	} {
		if !citation.MatchString(line) {
			t.Errorf("%q: not matched", line)
		}
	}
	for _, line := range []string{
		"edgeq issues a challenge", "tokens issued by one replica", "Let's Encrypt issues at most 5 a week",
		"edgeq-bench chaos -seed 20261128", "[-seed 1]", "its seed's SHA-256 is logged",
		"the shop's acceptance is committed", "The full contract is in docs/reference.md",
		"Go 1.26's coordinator race (golang/go#75804)",
	} {
		if citation.MatchString(line) {
			t.Errorf("%q: matched", line)
		}
	}
}
