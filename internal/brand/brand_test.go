package brand

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Reference values: black on white is 21:1 by definition, #767676 is the lightest grey that passes
// 4.5:1 on white and #777777 the first that fails (WebAIM's contrast checker gives 4.54 and 4.48).
func TestContrast_MatchesWCAGReferenceValues(t *testing.T) {
	cases := []struct {
		a, b string
		want float64
	}{
		{"#000000", "#ffffff", 21},
		{"#ffffff", "#ffffff", 1},
		{"#767676", "#ffffff", 4.54},
		{"#777", "#fff", 4.48},
	}
	for _, c := range cases {
		got := Contrast(MustParse(c.a), MustParse(c.b))
		if math.Abs(got-c.want) > 0.01 {
			t.Errorf("contrast %s on %s = %.3f, want %.2f", c.a, c.b, got, c.want)
		}
		if back := Contrast(MustParse(c.b), MustParse(c.a)); back != got {
			t.Errorf("contrast is not symmetric: %v %v", got, back)
		}
	}
}

func TestParse_OnlyHexColours(t *testing.T) {
	for in, want := range map[string]string{"#abc": "#aabbcc", "#0A7C42": "#0a7c42", "#000": "#000000"} {
		c, err := Parse(in)
		if err != nil || c.String() != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, c, err, want)
		}
	}
	// Everything else is refused: it would land in a stylesheet.
	for _, in := range []string{"", "red", "#abcd", "#abcdef0", "0a7c42", "rgb(0,0,0)", "#abc;}body{display:none", "#0a7c42 ", "#ggg", "#0a7c42\n"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}

func TestNewAccent_RefusesColoursThatFailAA(t *testing.T) {
	for _, bad := range []string{"#ffcc00", "#7aa7ff", "#888888", "#ffffff", "#3b82f6"} {
		_, err := NewAccent(bad)
		if err == nil {
			t.Errorf("%s accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), "WCAG AA asks 4.5:1") || !strings.Contains(err.Error(), "against the page background") {
			t.Errorf("%s: unclear refusal: %v", bad, err)
		}
		// The shade the refusal suggests is itself accepted.
		suggestion := regexp.MustCompile(`for example (#[0-9a-f]{6})`).FindStringSubmatch(err.Error())
		if suggestion == nil {
			t.Errorf("%s: no suggestion in %v", bad, err)
		} else if _, err := NewAccent(suggestion[1]); err != nil {
			t.Errorf("%s: the suggested %s is refused: %v", bad, suggestion[1], err)
		}
	}
	if _, err := NewAccent("blue"); err == nil || !strings.Contains(err.Error(), "not a CSS hex colour") {
		t.Errorf("a colour name: %v", err)
	}
}

// Every accepted colour, and its derived dark variant, meets 4.5:1 against every background of its
// scheme, and so does the button text chosen on each; checked over many random colours.
func TestNewAccent_EveryAcceptedColourAndItsVariantPass(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for range 20000 {
		c := RGB{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256))}
		a, err := NewAccent(c.String())
		if err != nil {
			if r, _ := worst(c, LightBackgrounds); r >= MinContrast {
				t.Fatalf("%s refused though it passes on light backgrounds (%.2f): %v", c, r, err)
			}
			continue
		}
		accepted++
		checks := []struct {
			fg  RGB
			bgs []RGB
		}{{a.Light, LightBackgrounds}, {a.Dark, DarkBackgrounds}, {a.LightText, []RGB{a.Light}}, {a.DarkText, []RGB{a.Dark}}}
		for _, ch := range checks {
			for _, bg := range ch.bgs {
				if r := Contrast(ch.fg, bg); r < MinContrast {
					t.Fatalf("%s: %s on %s is %.2f:1", c, ch.fg, bg, r)
				}
			}
		}
		if a.Light != c {
			t.Fatalf("the light colour changed: %s -> %s", c, a.Light)
		}
	}
	if accepted < 1000 {
		t.Fatalf("only %d colours accepted", accepted)
	}
}

// The dark variant keeps the hue: a green stays green.
func TestNewAccent_DarkVariantKeepsTheHue(t *testing.T) {
	a, err := NewAccent("#0a7c42")
	if err != nil {
		t.Fatal(err)
	}
	h1, _, l1 := toHSL(a.Light)
	h2, _, l2 := toHSL(a.Dark)
	if math.Abs(h1-h2) > 0.02 || l2 <= l1 {
		t.Fatalf("light %s (h %.3f l %.2f), dark %s (h %.3f l %.2f)", a.Light, h1, l1, a.Dark, h2, l2)
	}
	if a.LightText != white || a.DarkText != black {
		t.Fatalf("text on %s: %s, on %s: %s", a.Light, a.LightText, a.Dark, a.DarkText)
	}
	css := a.CSS()
	for _, want := range []string{"--accent: #0a7c42; --accent-fg: #ffffff;", "@media (prefers-color-scheme: dark)", "--accent: " + a.Dark.String() + "; --accent-fg: #000000;"} {
		if !strings.Contains(css, want) {
			t.Errorf("CSS lacks %q:\n%s", want, css)
		}
	}
}

// The backgrounds the checks use are the stylesheet's, and edgeq's own accent passes the same checks
// in both schemes.
func TestBackgroundsAreTheStylesheets(t *testing.T) {
	css, err := os.ReadFile("../../static/edgeq.css")
	if err != nil {
		t.Fatal(err)
	}
	light, dark, ok := strings.Cut(string(css), "@media (prefers-color-scheme: dark)")
	if !ok {
		t.Fatal("edgeq.css has no dark scheme")
	}
	dark, _, _ = strings.Cut(dark, "}\n")
	prop := func(block, name string) RGB {
		m := regexp.MustCompile(`--` + name + `:\s*(#[0-9a-fA-F]{3,6})\b`).FindStringSubmatch(block)
		if m == nil {
			t.Fatalf("no --%s in %q", name, block)
		}
		return MustParse(m[1])
	}
	if got := []RGB{prop(light, "bg"), prop(light, "card")}; got[0] != LightBackgrounds[0] || got[1] != LightBackgrounds[1] {
		t.Errorf("light backgrounds in edgeq.css %v, in the check %v", got, LightBackgrounds)
	}
	if got := []RGB{prop(dark, "bg"), prop(dark, "card")}; got[0] != DarkBackgrounds[0] || got[1] != DarkBackgrounds[1] {
		t.Errorf("dark backgrounds in edgeq.css %v, in the check %v", got, DarkBackgrounds)
	}
	for _, scheme := range []struct {
		block string
		bgs   []RGB
	}{{light, LightBackgrounds}, {dark, DarkBackgrounds}} {
		accent, text := prop(scheme.block, "accent"), prop(scheme.block, "accent-fg")
		if r, bg := worst(accent, scheme.bgs); r < MinContrast {
			t.Errorf("edgeq's accent %s on %s: %.2f:1", accent, bg, r)
		}
		if r := Contrast(accent, text); r < MinContrast {
			t.Errorf("edgeq's button text %s on %s: %.2f:1", text, accent, r)
		}
	}
}

func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.NRGBA{10, 124, 66, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A WebP file's RIFF header and a VP8L chunk header: enough for the sniffing, which is all edgeq does
// with a WebP.
var webpBytes = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")

const svgLogo = `<?xml version="1.0" encoding="UTF-8"?>
<!-- the shop's mark -->
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 120 40"><rect width="120" height="40" fill="#0a7c42"/></svg>`

func TestCheckLogo(t *testing.T) {
	good := []struct {
		name string
		body []byte
		ct   string
	}{
		{"logo.png", pngBytes(t, 120, 40), "image/png"},
		{"Logo.PNG", pngBytes(t, 1, 1), "image/png"},
		{"logo.webp", webpBytes, "image/webp"},
		{"logo.svg", []byte(svgLogo), "image/svg+xml"},
		{"sized.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40"/>`), "image/svg+xml"},
	}
	for _, g := range good {
		l, err := CheckLogo(g.name, g.body)
		if err != nil || l.ContentType != g.ct || !bytes.Equal(l.Body, g.body) {
			t.Errorf("%s: %v %q", g.name, err, l.ContentType)
		}
		if l.SVG() != (g.ct == "image/svg+xml") {
			t.Errorf("%s: SVG() = %v", g.name, l.SVG())
		}
	}
	bad := []struct {
		name string
		body []byte
		want string
	}{
		{"logo.gif", []byte("GIF89a"), "must be a PNG, SVG or WebP file"},
		{"logo", pngBytes(t, 2, 2), "must be a PNG, SVG or WebP file"},
		{"logo.png", []byte(svgLogo), "named .png but its content is image/svg+xml"},
		{"logo.svg", pngBytes(t, 2, 2), "named .svg but its content is image/png"},
		{"logo.webp", pngBytes(t, 2, 2), "named .webp but its content is image/png"},
		{"logo.svg", []byte(`<html><body>not an image</body></html>`), "content is not a PNG, SVG or WebP image"},
		{"logo.png", []byte("just text"), "content is not a PNG, SVG or WebP image"},
		{"logo.png", []byte("\x89PNG\r\n\x1a\nbroken"), "not a readable PNG"},
		{"logo.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>`), "needs a viewBox"},
		{"logo.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><rect></svg>`), "not a well-formed SVG"},
	}
	for _, b := range bad {
		if _, err := CheckLogo(b.name, b.body); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s %.20q: %v, want %q", b.name, b.body, err, b.want)
		}
	}
}

func TestReadLogo(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "logo.svg")
	os.WriteFile(ok, []byte(svgLogo), 0o644)
	if l, err := ReadLogo(ok); err != nil || l.Ext != ".svg" {
		t.Fatalf("%v %v", l.Ext, err)
	}
	big := filepath.Join(dir, "big.png")
	body := append(pngBytes(t, 4, 4), make([]byte, MaxLogoBytes)...)
	os.WriteFile(big, body, 0o644)
	if _, err := ReadLogo(big); err == nil || !strings.Contains(err.Error(), "a logo may be at most 256 KiB") {
		t.Errorf("a large file: %v", err)
	}
	exact := filepath.Join(dir, "exact.svg")
	os.WriteFile(exact, append([]byte(svgLogo), bytes.Repeat([]byte(" "), MaxLogoBytes-len(svgLogo))...), 0o644)
	if _, err := ReadLogo(exact); err != nil {
		t.Errorf("a file of exactly 256 KiB: %v", err)
	}
	if _, err := ReadLogo(filepath.Join(dir, "missing.png")); err == nil {
		t.Error("a missing file was accepted")
	}
	if _, err := ReadLogo(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
}
