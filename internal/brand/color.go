// Package brand is the shop's look on edgeq's pages: the logo file (pages.logo_file), checked before it
// is served, and the accent colour (pages.accent_color), checked for contrast and turned into a small
// stylesheet with a light and a dark variant.
package brand

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// MinContrast is the WCAG 2.1 AA contrast ratio for normal text (success criterion 1.4.3). The accent
// colours text (secondary buttons, links) and the backgrounds of buttons with text on them, so it is
// held to the text ratio, not the 3:1 of graphics.
const MinContrast = 4.5

// The backgrounds the accent sits on, as static/edgeq.css defines them (--bg for the page, --card for
// the card the content is in); a test keeps them equal to the stylesheet's.
var (
	LightBackgrounds = []RGB{MustParse("#f4f5f7"), MustParse("#ffffff")}
	DarkBackgrounds  = []RGB{MustParse("#121417"), MustParse("#1b1e23")}
	white, black     = RGB{255, 255, 255}, RGB{0, 0, 0}
)

// RGB is an sRGB colour with 8 bits per channel.
type RGB struct{ R, G, B uint8 }

// hexColor is the only syntax accepted: the value ends up in a stylesheet, so nothing but #rgb or
// #rrggbb (no names, no functions, nothing that could carry more CSS) is let through.
var hexColor = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)

// Parse reads "#rgb" or "#rrggbb" (either case).
func Parse(s string) (RGB, error) {
	if !hexColor.MatchString(s) {
		return RGB{}, fmt.Errorf("%q is not a CSS hex colour such as #0a7c42 or #07c", s)
	}
	digits := s[1:]
	if len(digits) == 3 {
		digits = string([]byte{digits[0], digits[0], digits[1], digits[1], digits[2], digits[2]})
	}
	v, _ := strconv.ParseUint(digits, 16, 32) // the pattern admits only six hex digits
	//nolint:gosec // each byte of a 24-bit colour, truncation intended
	return RGB{uint8(v >> 16), uint8(v >> 8), uint8(v)}, nil
}

// MustParse is Parse for constants.
func MustParse(s string) RGB {
	c, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

// String is the colour as #rrggbb.
func (c RGB) String() string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// Luminance is the relative luminance of WCAG 2.1 (the definition under "relative luminance"): each
// sRGB channel linearised, then weighted 0.2126 R + 0.7152 G + 0.0722 B. WCAG 2.1 writes the threshold
// 0.03928; the sRGB standard's 0.04045 gives the same result for every 8-bit value.
func (c RGB) Luminance() float64 {
	linear := func(v uint8) float64 {
		s := float64(v) / 255
		if s <= 0.03928 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	return 0.2126*linear(c.R) + 0.7152*linear(c.G) + 0.0722*linear(c.B)
}

// Contrast is the WCAG 2.1 contrast ratio (L1 + 0.05) / (L2 + 0.05), L1 the lighter: 1 to 21.
func Contrast(a, b RGB) float64 {
	la, lb := a.Luminance(), b.Luminance()
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// worst is the lowest contrast of c against any of backgrounds, and that background.
func worst(c RGB, backgrounds []RGB) (float64, RGB) {
	lowest, against := math.Inf(1), RGB{}
	for _, bg := range backgrounds {
		if r := Contrast(c, bg); r < lowest {
			lowest, against = r, bg
		}
	}
	return lowest, against
}

// TextOn is the text colour for a background: white or black, whichever contrasts more.
func TextOn(bg RGB) RGB {
	if Contrast(white, bg) >= Contrast(black, bg) {
		return white
	}
	return black
}

// Accent is an operator's accent colour with what edgeq derives from it.
type Accent struct {
	Light     RGB // the colour as configured, for light pages
	LightText RGB // text on Light (buttons)
	Dark      RGB // the variant for prefers-color-scheme: dark
	DarkText  RGB // text on Dark
}

// NewAccent checks an accent colour and derives its dark variant. The colour must reach MinContrast
// against both light backgrounds (it is the text colour of secondary buttons on the card, and the
// fill of buttons on the page). The dark variant keeps its hue and saturation and is lightened, one
// percent of HSL lightness at a time, until it reaches MinContrast against both dark backgrounds (white
// always does, so there is always one). Button text on each is white or black, whichever contrasts
// more; both are checked too, so a future change of backgrounds cannot slip by.
func NewAccent(s string) (Accent, error) {
	light, err := Parse(strings.TrimSpace(s))
	if err != nil {
		return Accent{}, err
	}
	if ratio, bg := worst(light, LightBackgrounds); ratio < MinContrast {
		return Accent{}, fmt.Errorf("%s has a contrast of %.2f:1 against the page background %s; WCAG AA asks %.1f:1 for text, so pick a darker shade (for example %s)",
			light, ratio, bg, MinContrast, darken(light))
	}
	a := Accent{Light: light, LightText: TextOn(light), Dark: lighten(light)}
	a.DarkText = TextOn(a.Dark)
	if ratio, bg := worst(a.Dark, DarkBackgrounds); ratio < MinContrast {
		return Accent{}, fmt.Errorf("the dark-mode variant %s of %s has a contrast of %.2f:1 against %s, under %.1f:1", a.Dark, light, ratio, bg, MinContrast)
	}
	for _, pair := range [][2]RGB{{a.Light, a.LightText}, {a.Dark, a.DarkText}} {
		if r := Contrast(pair[0], pair[1]); r < MinContrast {
			return Accent{}, fmt.Errorf("button text %s on %s has a contrast of %.2f:1, under %.1f:1", pair[1], pair[0], r, MinContrast)
		}
	}
	return a, nil
}

// CSS is the stylesheet that puts the accent on the pages: it overrides edgeq.css's custom properties
// and so must load after it.
func (a Accent) CSS() string {
	return fmt.Sprintf(`/* pages.accent_color %s, and its dark-mode variant derived by edgeq. */
:root { --accent: %s; --accent-fg: %s; }
@media (prefers-color-scheme: dark) {
  :root { --accent: %s; --accent-fg: %s; }
}
`, a.Light, a.Light, a.LightText, a.Dark, a.DarkText)
}

// lighten is the dark-mode variant of c (see NewAccent).
func lighten(c RGB) RGB {
	h, s, l := toHSL(c)
	for ; l <= 1; l += 0.01 {
		if v := fromHSL(h, s, l); minContrast(v, DarkBackgrounds) {
			return v
		}
	}
	return white
}

// darken suggests a shade of c with the same hue that light pages accept, for the error message.
func darken(c RGB) RGB {
	h, s, l := toHSL(c)
	for ; l >= 0; l -= 0.01 {
		if v := fromHSL(h, s, l); minContrast(v, LightBackgrounds) {
			return v
		}
	}
	return black
}

func minContrast(c RGB, backgrounds []RGB) bool {
	r, _ := worst(c, backgrounds)
	return r >= MinContrast
}

// toHSL and fromHSL convert between sRGB and HSL (CSS Color 4, section 7), hue in [0, 1).
func toHSL(c RGB) (h, s, l float64) {
	r, g, b := float64(c.R)/255, float64(c.G)/255, float64(c.B)/255
	hi, lo := math.Max(r, math.Max(g, b)), math.Min(r, math.Min(g, b))
	l = (hi + lo) / 2
	d := hi - lo
	if d == 0 {
		return 0, 0, l
	}
	s = d / (1 - math.Abs(2*l-1))
	switch hi {
	case r:
		h = math.Mod((g-b)/d, 6)
	case g:
		h = (b-r)/d + 2
	default:
		h = (r-g)/d + 4
	}
	h /= 6
	if h < 0 {
		h++
	}
	return h, s, l
}

func fromHSL(h, s, l float64) RGB {
	l = math.Min(1, math.Max(0, l))
	chroma := (1 - math.Abs(2*l-1)) * s
	hp := h * 6
	x := chroma * (1 - math.Abs(math.Mod(hp, 2)-1))
	var r, g, b float64
	switch {
	case hp < 1:
		r, g = chroma, x
	case hp < 2:
		r, g = x, chroma
	case hp < 3:
		g, b = chroma, x
	case hp < 4:
		g, b = x, chroma
	case hp < 5:
		r, b = x, chroma
	default:
		r, b = chroma, x
	}
	m := l - chroma/2
	to8 := func(v float64) uint8 { return uint8(math.Round(math.Min(1, math.Max(0, v+m)) * 255)) }
	return RGB{to8(r), to8(g), to8(b)}
}
