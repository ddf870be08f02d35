// Package static serves the CSS, scripts and images of edgeq's pages from the binary. Each file is served
// under a name that carries a hash of its content ("edgeq.3f9a0c1d2e.css"), with a one-year immutable
// cache lifetime: a new release changes the name, so browsers never keep a stale copy. Files worth it
// are compressed once, when they are added, and served compressed to clients that accept gzip.
package static

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/edgeq/edgeq/internal/compression"
)

//go:embed *.css *.js *.svg
var files embed.FS

// Assets serves the embedded files below a URL base such as "/_edgeq/static/".
type Assets struct {
	base    string
	byName  map[string]string // "edgeq.css" -> "edgeq.<hash>.css"
	content map[string]asset  // hashed name -> file
}

// SVGPolicy is the Content-Security-Policy of every SVG served: no script, no loads, only the inline
// styles an SVG commonly uses.
const SVGPolicy = "default-src 'none'; style-src 'unsafe-inline'"

const svgType = "image/svg+xml"

type asset struct {
	body        []byte
	contentType string
	// gzipped is body compressed (compression.Precompress), nil when not worth it.
	gzipped []byte
}

// New indexes the embedded files for serving below base (which must end in "/").
func New(base string) *Assets {
	a := &Assets{base: base, byName: map[string]string{}, content: map[string]asset{}}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		body, _ := files.ReadFile(e.Name())
		a.Add(e.Name(), body, mime.TypeByExtension(path.Ext(e.Name())))
	}
	return a
}

// Add serves body under name (with its content hash, like the embedded files) and returns its URL:
// files made at start-up from the configuration, such as the operator's logo (pages.logo_file) and
// accent stylesheet. A name added twice serves the last body. Not safe while serving: call it before.
func (a *Assets) Add(name string, body []byte, contentType string) string {
	sum := sha256.Sum256(body)
	ext := path.Ext(name)
	hashed := strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:5]) + ext
	if old, ok := a.byName[name]; ok {
		delete(a.content, old)
	}
	a.byName[name] = hashed
	a.content[hashed] = asset{body: body, contentType: contentType, gzipped: compression.Precompress(body, contentType)}
	return a.base + hashed
}

// URL returns the versioned URL of an embedded file, for templates. An unknown name returns "" (and
// templates.Parse's tests make sure every name a template uses exists).
func (a *Assets) URL(name string) string {
	hashed, ok := a.byName[name]
	if !ok {
		return ""
	}
	return a.base + hashed
}

// ServeHTTP serves a versioned file; any other name is 404.
func (a *Assets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, a.base)
	f, ok := a.content[name]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	if strings.HasPrefix(f.contentType, svgType) {
		// An SVG may carry script and links. Shown in an <img> none of it runs, but opened on its own
		// (its URL typed in) it is a document of edgeq's origin: this policy keeps it an inert picture.
		h.Set("Content-Security-Policy", SVGPolicy)
	}
	if f.gzipped != nil {
		// A cache in front of edgeq keeps the compressed and the plain copy apart.
		compression.AddVary(h)
		if compression.Negotiated(r) {
			// Written here, not by ServeContent, which would leave out the length of an encoded body.
			// The whole body: ranges are served from the plain one (Negotiated).
			h.Set("Content-Encoding", "gzip")
			h.Set("Content-Length", strconv.Itoa(len(f.gzipped)))
			_, _ = w.Write(f.gzipped)
			return
		}
	}
	// ServeContent handles Range, HEAD and conditional requests; the zero modtime skips Last-Modified,
	// the hashed name makes an ETag unnecessary.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}

// Read returns an embedded file's content: for a page that must hold its style itself (the report
// written as one file by `edgeq report -out`).
func Read(name string) ([]byte, error) { return files.ReadFile(name) }
