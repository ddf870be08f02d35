// Command licenses writes THIRD_PARTY_LICENSES.md: the Go standard library and every module that
// edgeq's commands link, each with its version and the text of its licence files as the module cache
// holds them. `make licenses` runs it; its test fails when the committed file is out of date.
//
//	go run ./scripts/licenses [-o FILE]
//
// It asks the go command which packages the commands under cmd/ link (go list -deps, for each
// platform make release builds), so modules that go.mod lists only for tests and tools are left out.
// A module without a licence file is an error that names it: nothing ships without its terms.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// packages are the commands whose binaries the file covers.
const packages = "./cmd/..."

// platforms are those make release builds; a module linked on any of them is listed.
var platforms = []string{"linux/amd64", "linux/arm64"}

func main() {
	out := flag.String("o", "", "write to FILE instead of standard output")
	flag.Parse()
	if err := run(".", *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "licenses:", err)
		os.Exit(1)
	}
}

// run writes the file for the module rooted at dir to out ("" for stdout).
func run(dir, out string, stdout io.Writer) error {
	mods, err := linkedModules(dir)
	if err != nil {
		return err
	}
	goroot, err := goEnv(dir, "GOROOT")
	if err != nil {
		return err
	}
	std := module{Path: "Go standard library", Version: "the toolchain that builds the binary", Dir: goroot}
	entries, err := readLicences(append([]module{std}, mods...))
	if err != nil {
		return err
	}
	var b bytes.Buffer
	write(&b, entries)
	if out == "" {
		_, err = stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}

// module is what the go command says of a module a package belongs to.
type module struct {
	Path    string
	Version string
	Main    bool
	Dir     string
	Replace *module
}

// linkedModules lists the modules (not the main one) of every package the commands link on any of
// the platforms, sorted by path, each with its directory in the module cache.
func linkedModules(dir string) ([]module, error) {
	seen := map[string]module{}
	for _, platform := range platforms {
		goos, goarch, _ := strings.Cut(platform, "/")
		cmd := exec.Command("go", "list", "-deps", "-json=Module", packages)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -deps %s (%s): %v\n%s", packages, platform, err, stderr.String())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var pkg struct{ Module *module }
			if err := dec.Decode(&pkg); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("go list -deps: %v", err)
			}
			m := pkg.Module
			if m == nil || m.Main { // the standard library, or edgeq itself
				continue
			}
			if m.Replace != nil {
				m = &module{Path: m.Path, Version: m.Replace.Version, Dir: m.Replace.Dir, Replace: m.Replace}
			}
			seen[m.Path] = *m
		}
	}
	mods := make([]module, 0, len(seen))
	for _, m := range seen {
		if m.Dir == "" { // not in the module cache: fetch it
			d, err := download(dir, m)
			if err != nil {
				return nil, err
			}
			m.Dir = d
		}
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b module) int { return strings.Compare(a.Path, b.Path) })
	return mods, nil
}

// download fills the module cache with one module and returns its directory.
func download(dir string, m module) (string, error) {
	target := m.Path + "@" + m.Version
	if m.Replace != nil && m.Replace.Version != "" {
		target = m.Replace.Path + "@" + m.Replace.Version
	}
	cmd := exec.Command("go", "mod", "download", "-json", target)
	cmd.Dir = dir
	out, err := cmd.Output()
	var got struct{ Dir, Error string }
	_ = json.Unmarshal(out, &got) // not JSON when the command failed: err says so below
	if err != nil || got.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s", target, err, got.Error)
	}
	return got.Dir, nil
}

func goEnv(dir, name string) (string, error) {
	cmd := exec.Command("go", "env", name)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// licenceFile matches the names of the files that carry a module's terms at its root: LICENSE,
// LICENCE, COPYING, COPYRIGHT, NOTICE, PATENTS and UNLICENSE, with any extension or suffix
// (LICENSE.txt, LICENSE-APACHE, COPYING.md).
var licenceFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying|copyright|notice|patents|unlicense)([._-].*)?$`)

// entry is one module with its licence files.
type entry struct {
	module
	files []file
}

type file struct {
	name, text string
}

// readLicences reads each module's licence files from its root directory; a module without one is an
// error that names it (and every other such module).
func readLicences(mods []module) ([]entry, error) {
	var entries []entry
	var missing []string
	for _, m := range mods {
		names, err := licenceFiles(m.Dir)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", m.Path, m.Version, err)
		}
		if len(names) == 0 {
			missing = append(missing, fmt.Sprintf("%s %s (in %s)", m.Path, m.Version, m.Dir))
			continue
		}
		e := entry{module: m}
		for _, name := range names {
			data, err := os.ReadFile(filepath.Join(m.Dir, name))
			if err != nil {
				return nil, fmt.Errorf("%s %s: %v", m.Path, m.Version, err)
			}
			e.files = append(e.files, file{name: name, text: normalise(string(data))})
		}
		entries = append(entries, e)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no licence file (LICENSE, COPYING, NOTICE...) at the root of:\n  %s", strings.Join(missing, "\n  "))
	}
	return entries, nil
}

// licenceFiles lists the licence files at the root of a module directory, sorted by name.
func licenceFiles(dir string) ([]string, error) {
	listing, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range listing {
		// license.go and the like are code, not terms.
		if f.Type().IsRegular() && licenceFile.MatchString(f.Name()) && !strings.HasSuffix(f.Name(), ".go") {
			names = append(names, f.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// normalise gives a licence text Unix line ends, no trailing blanks on a line and no blank lines at
// either end, so that an editor's or a checkout's habits never make the file look out of date.
func normalise(text string) string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i, line := range lines {
		lines[i] = strings.TrimRight(line, " \t\r\f")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}
