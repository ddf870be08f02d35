// Package buildinfo says which edgeq a binary is: its version, the commit it was built from, the Go
// that built it and how. `edgeq version` prints it and the edgeq_build_info metric carries it, both
// from Read, so the two never disagree (docs/operations.md, "Reading the metrics").
package buildinfo

import (
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// Unknown is the value of a field the binary does not record: its version when it was built without a
// version and outside a repository, its revision outside a repository.
const Unknown = "unknown"

// Info describes one binary.
type Info struct {
	// Version is the release: the version stamped at link time (-X main.version=v1.2.3, as make build,
	// make release and the Dockerfile do); else the module version the go command recorded when it is a
	// release (go install ...@v1.2.3, or a build of a tagged checkout); else the commit's short hash,
	// with "+dirty" when the working tree had uncommitted changes; else "dev".
	Version string
	// Revision is the full hash of the commit the binary was built from, Unknown outside a repository
	// (or when the build was told -buildvcs=false).
	Revision string
	// Modified is true when the working tree had uncommitted changes at build time.
	Modified bool
	// CommitTime is the commit's time (RFC 3339, UTC) as recorded, "" when unknown.
	CommitTime string
	// GoVersion is the Go toolchain that built the binary, e.g. go1.26.8.
	GoVersion string
	// Platform is the binary's GOOS/GOARCH.
	Platform string
	// Settings are the build's settings as the go command recorded them (-trimpath, CGO_ENABLED, GOOS,
	// GOARCH, GOAMD64, -tags...), in its order, without the vcs ones (Revision, Modified and CommitTime
	// say those). -ldflags is recorded only for builds without -trimpath.
	Settings []debug.BuildSetting
}

// Read describes the running binary. stamped is the version set at link time ("" when none was).
func Read(stamped string) Info {
	bi, _ := debug.ReadBuildInfo() // nil when the binary carries no build information
	return FromBuildInfo(stamped, bi)
}

// FromBuildInfo describes a binary from its recorded build information (nil: none) and the version
// stamped at link time.
func FromBuildInfo(stamped string, bi *debug.BuildInfo) Info {
	info := Info{Revision: Unknown, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	mainVersion := ""
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		mainVersion = bi.Main.Version
		var goos, goarch string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			case "vcs.time":
				info.CommitTime = s.Value
			case "vcs":
			default:
				info.Settings = append(info.Settings, s)
			}
			switch s.Key {
			case "GOOS":
				goos = s.Value
			case "GOARCH":
				goarch = s.Value
			}
		}
		if goos != "" && goarch != "" {
			info.Platform = goos + "/" + goarch
		}
	}
	switch {
	case stamped != "":
		info.Version = stamped
	case IsRelease(mainVersion):
		info.Version = mainVersion
	case info.Revision != Unknown:
		info.Version = shortRevision(info.Revision)
		if info.Modified {
			info.Version += "+dirty"
		}
	default:
		info.Version = "dev"
	}
	return info
}

// shortRevision abbreviates a commit hash to 12 characters, as the go command's pseudo-versions do.
func shortRevision(revision string) string {
	if len(revision) > 12 {
		return revision[:12]
	}
	return revision
}

var (
	// A semantic version with the leading v the go command uses (https://semver.org, go.dev/ref/mod#versions).
	semanticVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	// A pseudo-version (go.dev/ref/mod#pseudo-versions): vX.0.0-yyyymmddhhmmss-abcdef123456,
	// vX.Y.Z-pre.0.yyyymmddhhmmss-abcdef123456 or vX.Y.(Z+1)-0.yyyymmddhhmmss-abcdef123456. The go
	// command writes one for a build of an untagged commit; it names a commit, not a release.
	pseudoVersion = regexp.MustCompile(`^v[0-9]+\.(0\.0-|[0-9]+\.[0-9]+-([^+]*\.)?0\.)[0-9]{14}-[A-Za-z0-9]+(\+[0-9A-Za-z.-]+)?$`)
)

// IsRelease reports whether a module version names a release: a semantic version that is not a
// pseudo-version. "(devel)", what the go command records for a build without version control
// information, is not one.
func IsRelease(version string) bool {
	return semanticVersion.MatchString(version) && !pseudoVersion.MatchString(version)
}

// Write prints the description `edgeq version` shows: the name and version on the first line, then
// one "key  value" line each for the commit, the Go version and platform, and the build settings.
func (i Info) Write(w io.Writer, name string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", name, i.Version)
	revision := i.Revision
	if i.Modified {
		revision += " (with uncommitted changes)"
	}
	fmt.Fprintf(&b, "  revision  %s\n", revision)
	if i.CommitTime != "" {
		fmt.Fprintf(&b, "  committed %s\n", i.CommitTime)
	}
	fmt.Fprintf(&b, "  go        %s %s\n", i.GoVersion, i.Platform)
	for n, s := range i.Settings {
		label := ""
		if n == 0 {
			label = "build"
		}
		value := s.Value
		if strings.ContainsAny(value, " \t\"`") {
			value = fmt.Sprintf("%q", value)
		}
		fmt.Fprintf(&b, "  %-9s %s=%s\n", label, s.Key, value)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
