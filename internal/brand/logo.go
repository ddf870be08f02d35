package brand

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MaxLogoBytes bounds pages.logo_file: every waiting browser loads it (once, then from its cache), and
// a logo needs no more.
const MaxLogoBytes = 256 << 10

// Logo is a checked logo file, ready to serve.
type Logo struct {
	Body        []byte
	ContentType string // image/png, image/svg+xml or image/webp
	Ext         string // ".png", ".svg" or ".webp", for the name it is served under
}

// SVG reports whether the logo is an SVG image (which may hold script, and so is served with a
// Content-Security-Policy of its own).
func (l Logo) SVG() bool { return l.ContentType == "image/svg+xml" }

var logoTypes = map[string]string{".png": "image/png", ".svg": "image/svg+xml", ".webp": "image/webp"}

// ReadLogo reads and checks a logo file: at most MaxLogoBytes, named .png, .svg or .webp, with content
// of that type (sniffed from the bytes, not taken from the name).
func ReadLogo(path string) (Logo, error) {
	f, err := os.Open(path) //nolint:gosec // pages.logo_file, named by the operator
	if err != nil {
		return Logo{}, err
	}
	defer func() { _ = f.Close() }()
	if info, err := f.Stat(); err != nil {
		return Logo{}, err
	} else if info.IsDir() {
		return Logo{}, fmt.Errorf("%s is a directory, not an image file", path)
	} else if info.Size() > MaxLogoBytes {
		return Logo{}, tooLarge(path, info.Size())
	}
	body, err := io.ReadAll(io.LimitReader(f, MaxLogoBytes+1))
	if err != nil {
		return Logo{}, err
	}
	if len(body) > MaxLogoBytes { // grew since the Stat
		return Logo{}, tooLarge(path, int64(len(body)))
	}
	return CheckLogo(path, body)
}

func tooLarge(path string, size int64) error {
	return fmt.Errorf("%s is %d KiB; a logo may be at most %d KiB", path, (size+1023)>>10, MaxLogoBytes>>10)
}

// CheckLogo checks a logo's bytes against its file name.
func CheckLogo(name string, body []byte) (Logo, error) {
	ext := strings.ToLower(filepath.Ext(name))
	want, ok := logoTypes[ext]
	if !ok {
		return Logo{}, fmt.Errorf("%s: a logo must be a PNG, SVG or WebP file (.png, .svg, .webp)", name)
	}
	got := sniff(body)
	if got == "" {
		return Logo{}, fmt.Errorf("%s is named %s but its content is not a PNG, SVG or WebP image", name, ext)
	}
	if got != want {
		return Logo{}, fmt.Errorf("%s is named %s but its content is %s", name, ext, got)
	}
	switch got {
	case "image/png":
		cfg, err := png.DecodeConfig(bytes.NewReader(body))
		if err != nil {
			return Logo{}, fmt.Errorf("%s is not a readable PNG: %v", name, err)
		}
		if cfg.Width == 0 || cfg.Height == 0 {
			return Logo{}, fmt.Errorf("%s is a PNG of %dx%d pixels", name, cfg.Width, cfg.Height)
		}
	case "image/svg+xml":
		if err := checkSVG(body); err != nil {
			return Logo{}, fmt.Errorf("%s: %v", name, err)
		}
	}
	return Logo{Body: body, ContentType: got, Ext: ext}, nil
}

// sniff tells the three accepted types apart by content: the PNG signature (RFC 2083 section 3.1), the
// RIFF container with a WEBP form type (RFC 9649), or XML whose root element is svg.
func sniff(body []byte) string {
	switch {
	case bytes.HasPrefix(body, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case len(body) >= 12 && string(body[:4]) == "RIFF" && string(body[8:12]) == "WEBP":
		return "image/webp"
	case rootElement(body) == "svg":
		return "image/svg+xml"
	}
	return ""
}

// rootElement is the local name of the first element of an XML document, "" if it is not XML.
func rootElement(body []byte) string {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.Token()
		if err != nil {
			return ""
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return t.Name.Local
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return ""
			}
		}
	}
}

// checkSVG reads the whole SVG (a browser shows nothing of a malformed one) and asks of its root what a
// browser needs to size it in an <img>: a viewBox, or a width and a height. Without either, browsers
// fall back to 300x150 or to nothing at all.
func checkSVG(body []byte) error {
	d := xml.NewDecoder(bytes.NewReader(body))
	sized, root := false, true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("not a well-formed SVG: %v", err)
		}
		if start, ok := tok.(xml.StartElement); ok && root {
			root = false
			attrs := map[string]bool{}
			for _, a := range start.Attr {
				if a.Name.Space == "" {
					attrs[a.Name.Local] = true
				}
			}
			sized = attrs["viewBox"] || (attrs["width"] && attrs["height"])
		}
	}
	if !sized {
		return errors.New("the <svg> element needs a viewBox (or a width and a height) so the page can size it")
	}
	return nil
}
