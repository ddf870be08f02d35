package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func recorded(mainVersion string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/edgeq/edgeq", Version: mainVersion}}
	for _, s := range settings {
		key, value, _ := strings.Cut(s, "=")
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: key, Value: value})
	}
	return bi
}

const revision = "20ece96abcdef0123456789abcdef0123456789a"

func TestFromBuildInfo_VersionComesFromTheStampThenTheReleaseThenTheCommit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"stamped at link time", "v9.8.7", recorded("v0.0.0-20261129075336-20ece96abcde", "vcs.revision="+revision), "v9.8.7"},
		{"stamped, even without build information", "v9.8.7", nil, "v9.8.7"},
		{"a release the go command recorded", "", recorded("v1.2.3", "vcs.revision="+revision), "v1.2.3"},
		{"a tagged checkout with changes", "", recorded("v1.2.3+dirty", "vcs.revision="+revision, "vcs.modified=true"), "v1.2.3+dirty"},
		{"a prerelease tag", "", recorded("v0.4.0-rc.1"), "v0.4.0-rc.1"},
		{"a pseudo-version names a commit", "", recorded("v0.0.0-20261129075336-20ece96abcde", "vcs.revision="+revision, "vcs.modified=false"), "20ece96abcde"},
		{"a pseudo-version after a tag", "", recorded("v0.3.1-0.20261129075336-20ece96abcde+dirty", "vcs.revision="+revision, "vcs.modified=true"), "20ece96abcde+dirty"},
		{"a pseudo-version after a prerelease", "", recorded("v0.4.0-rc.1.0.20261129075336-20ece96abcde", "vcs.revision="+revision), "20ece96abcde"},
		{"(devel) with a commit", "", recorded("(devel)", "vcs.revision="+revision, "vcs.modified=true"), "20ece96abcde+dirty"},
		{"(devel) without version control", "", recorded("(devel)"), "dev"},
		{"no build information", "", nil, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromBuildInfo(tc.stamped, tc.bi).Version; got != tc.want {
				t.Errorf("version %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFromBuildInfo_CommitGoAndSettings(t *testing.T) {
	info := FromBuildInfo("v9.8.7", recorded("(devel)", "-buildmode=exe", "-trimpath=true", "CGO_ENABLED=0",
		"GOARCH=arm64", "GOOS=linux", "vcs=git", "vcs.revision="+revision, "vcs.time=2026-11-29T07:53:36Z", "vcs.modified=true"))
	if info.Revision != revision || !info.Modified || info.CommitTime != "2026-11-29T07:53:36Z" {
		t.Errorf("commit: %q modified %v at %q", info.Revision, info.Modified, info.CommitTime)
	}
	if info.GoVersion != "go1.26.8" || info.Platform != "linux/arm64" {
		t.Errorf("go %q platform %q", info.GoVersion, info.Platform)
	}
	var keys []string
	for _, s := range info.Settings {
		keys = append(keys, s.Key)
	}
	if got := strings.Join(keys, " "); got != "-buildmode -trimpath CGO_ENABLED GOARCH GOOS" {
		t.Errorf("settings %s (the vcs ones are said apart)", got)
	}

	bare := FromBuildInfo("", nil)
	if bare.Revision != Unknown || bare.GoVersion != runtime.Version() || bare.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("without build information: %+v", bare)
	}
}

func TestIsRelease(t *testing.T) {
	for version, want := range map[string]bool{
		"v0.4.0": true, "v1.2.3+dirty": true, "v0.4.0-rc.1": true, "v10.20.30": true,
		"": false, "(devel)": false, "0.4.0": false, "v1.2": false, "v01.2.3": false, "dev": false,
		"v0.0.0-20261129075336-20ece96abcde":         false,
		"v0.3.1-0.20261129075336-20ece96abcde":       false,
		"v0.4.0-rc.1.0.20261129075336-20ece96abcde":  false,
		"v0.0.0-20261129075336-20ece96abcde+dirty":   false,
		"v0.0.0-test.20261129075336":                 true, // a prerelease, not a pseudo-version
		"v0.0.0-test-20261129075336-20ece96abcde123": true,
	} {
		if got := IsRelease(version); got != want {
			t.Errorf("IsRelease(%q) = %v, want %v", version, got, want)
		}
	}
}

func TestWrite_VersionFirstThenCommitGoAndBuild(t *testing.T) {
	info := FromBuildInfo("v9.8.7", recorded("(devel)", "-ldflags=-s -w -X main.version=v9.8.7", "CGO_ENABLED=0",
		"GOARCH=amd64", "GOOS=linux", "vcs.revision="+revision, "vcs.time=2026-11-29T07:53:36Z", "vcs.modified=true"))
	var b strings.Builder
	if err := info.Write(&b, "edgeq"); err != nil {
		t.Fatal(err)
	}
	want := `edgeq v9.8.7
  revision  ` + revision + ` (with uncommitted changes)
  committed 2026-11-29T07:53:36Z
  go        go1.26.8 linux/amd64
  build     -ldflags="-s -w -X main.version=v9.8.7"
            CGO_ENABLED=0
            GOARCH=amd64
            GOOS=linux
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
