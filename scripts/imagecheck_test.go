//go:build imagecheck

package scripts

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImageMatchesDockerfile checks a built image against the Dockerfile's final stage: its settings
// (`podman image inspect` output in EDGEQ_IMAGE_INSPECT) and its files (the exported root filesystem
// in EDGEQ_IMAGE_ROOTFS). `make image-check` (scripts/image.sh check) runs it with the imagecheck
// build tag; `go test ./...` does not build it, as it has no image to look at.
func TestImageMatchesDockerfile(t *testing.T) {
	inspectFile, rootfs := os.Getenv("EDGEQ_IMAGE_INSPECT"), os.Getenv("EDGEQ_IMAGE_ROOTFS")
	if inspectFile == "" || rootfs == "" {
		t.Fatal("EDGEQ_IMAGE_INSPECT and EDGEQ_IMAGE_ROOTFS name no image: make image-check runs this test on the image it builds")
	}
	_, final := readDockerfile(t)
	want := settingsOf(t, final)

	data, err := os.ReadFile(inspectFile)
	if err != nil {
		t.Fatal(err)
	}
	var images []struct {
		Config struct {
			User         string
			Env          []string
			ExposedPorts map[string]struct{}
			Entrypoint   []string
			Cmd          []string
			Labels       map[string]string
		}
	}
	if err := json.Unmarshal(data, &images); err != nil || len(images) != 1 {
		t.Fatalf("%s: %v (%d images)", inspectFile, err, len(images))
	}
	cfg := images[0].Config
	if cfg.User != want.user {
		t.Errorf("user %q, the Dockerfile's %q", cfg.User, want.user)
	}
	env := map[string]string{}
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	// Builders give an image FROM scratch a default PATH (docker build does too).
	if _, set := want.env["PATH"]; !set {
		delete(env, "PATH")
	}
	if !maps.Equal(env, want.env) {
		t.Errorf("environment %v, the Dockerfile's %v", env, want.env)
	}
	ports := slices.Sorted(maps.Keys(cfg.ExposedPorts))
	if !slices.Equal(ports, want.ports) {
		t.Errorf("exposed ports %v, the Dockerfile's %v", ports, want.ports)
	}
	if !slices.Equal(cfg.Entrypoint, want.entrypoint) || !slices.Equal(cfg.Cmd, want.cmd) {
		t.Errorf("entrypoint %q and command %q, the Dockerfile's %q and %q", cfg.Entrypoint, cfg.Cmd, want.entrypoint, want.cmd)
	}
	if len(cfg.Labels) != 0 {
		t.Errorf("labels %v, the Dockerfile sets none", cfg.Labels)
	}

	// The files: what the final stage copies and nothing else, readable by the image's user.
	owned := map[string]bool{}
	for _, c := range want.copies {
		for i, target := range c.targets() {
			local := filepath.Join(rootfs, target)
			info, err := os.Lstat(local)
			if err != nil {
				t.Errorf("the image has no %s: %v", target, err)
				continue
			}
			owned[target] = true
			if !c.fromBuild {
				src := c.srcs[0]
				if strings.HasSuffix(c.dest, "/") {
					src = c.srcs[i]
				}
				repo, err := os.ReadFile(filepath.Join("..", src))
				if err != nil {
					t.Fatal(err)
				}
				if got, err := os.ReadFile(local); err != nil || !bytes.Equal(got, repo) {
					t.Errorf("the image's %s is not the repository's %s", target, src)
				}
			}
			if info.Mode().Perm()&0o004 == 0 {
				t.Errorf("%s is not readable by the image's user (%v)", target, info.Mode())
			}
		}
	}
	err = filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == rootfs {
			return err
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(p, rootfs+string(filepath.Separator)))
		for dir := rel; dir != "/"; dir = path.Dir(dir) {
			if owned[dir] {
				return nil
			}
		}
		if d.IsDir() {
			return nil // a parent of the files copied
		}
		t.Errorf("the image holds %s, which the Dockerfile does not copy", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The binary is static (no interpreter to load it) and runs for anyone.
	bin := filepath.Join(rootfs, want.entrypoint[0])
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("%s: %v", want.entrypoint[0], err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", want.entrypoint[0])
		}
	}
	if info, err := os.Stat(bin); err != nil || info.Mode().Perm()&0o001 == 0 {
		t.Errorf("%s is not executable by the image's user", want.entrypoint[0])
	}
	for _, zone := range []string{"UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo"} {
		tz, err := os.ReadFile(filepath.Join(rootfs, "usr/share/zoneinfo", zone))
		if err != nil || !bytes.HasPrefix(tz, []byte("TZif")) {
			t.Errorf("the image has no time zone %s (%v)", zone, err)
		}
	}
	if ca, err := os.ReadFile(filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt")); err != nil ||
		bytes.Count(ca, []byte("-----BEGIN CERTIFICATE-----")) < 50 {
		t.Errorf("the image's CA bundle is missing or nearly empty (%v)", err)
	}
}
