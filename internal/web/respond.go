package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeq/edgeq/internal/compression"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/templates"
)

// WantsHTML reports whether r is a browser navigation (GET or HEAD accepting text/html), which gets an
// HTML page instead of a JSON body (docs/reference.md "Errors").
func WantsHTML(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	for _, accept := range r.Header.Values("Accept") {
		if strings.Contains(accept, "text/html") {
			return true
		}
	}
	return false
}

// IsNavigation reports whether r comes from a browser showing the answer as a page: a navigation by
// WantsHTML, or any request the browser marks as one (Sec-Fetch-Mode: navigate, such as a form
// submission), or a form POST that accepts HTML. Such requests get error pages instead of JSON.
func IsNavigation(r *http.Request) bool {
	if WantsHTML(r) || r.Header.Get("Sec-Fetch-Mode") == "navigate" {
		return true
	}
	if r.Method != http.MethodPost || !strings.Contains(r.Header.Get("Accept"), "text/html") {
		return false
	}
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/x-www-form-urlencoded") || strings.HasPrefix(ct, "multipart/form-data")
}

// WriteJSON writes v as a JSON answer that no cache keeps.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only reachable with a value that cannot be marshalled, which is a bug in edgeq.
		http.Error(w, `{"success":false,"error":"INTERNAL","message":"response encoding failed"}`, http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// PageSecurityHeaders are set on every page edgeq renders: nothing is framed, nothing but edgeq's own
// assets loads. A Referrer-Policy the handler set already (a stricter one) is kept.
func PageSecurityHeaders(h http.Header, csp string) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	if h.Get("Referrer-Policy") == "" {
		h.Set("Referrer-Policy", "same-origin")
	}
	h.Set("Content-Security-Policy", csp)
}

// DefaultCSP allows edgeq's own styles and scripts only.
const DefaultCSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Responder writes the answers edgeq gives itself: error bodies and pages.
type Responder struct {
	Pages *templates.Set
	Brand string
	Lang  string // the fallback language (pages.default_language)
	// Languages are the languages offered (pages.languages); none offers every built-in one.
	Languages []string
	// The shop's look (pages.logo_file, pages.accent_color), as URLs edgeq serves; "" for none.
	LogoURL, AccentStylesheet string

	// brokenRefusals holds the refusal.json templates (*template.Template, one per route and
	// configuration load) that failed at run time and were logged: each is logged once.
	brokenRefusals sync.Map
}

// PageBase is the data every page template gets.
type PageBase struct {
	Brand         string
	Lang          string         // BCP 47 tag of the page's language
	Text          templates.Text // {{.Text.T "key"}}
	CorrelationID string
	// LogoURL is the operator's logo, shown in place of the brand text (the brand is its alt text).
	LogoURL string
	// AccentStylesheet sets the operator's accent colour; it loads after edgeq.css. A stylesheet and
	// not a style attribute: the pages' Content-Security-Policy allows no inline styles.
	AccentStylesheet string
}

// Base returns the page data common to every page for r, in the language the visitor's
// Accept-Language prefers among those offered (pages.default_language otherwise).
func (rs *Responder) Base(r *http.Request) PageBase {
	text := templates.For(templates.Negotiate(r.Header.Get("Accept-Language"), rs.Lang, rs.Languages...))
	return PageBase{Brand: rs.Brand, Lang: text.Lang(), Text: text, CorrelationID: RequestFrom(r.Context()).CorrelationID,
		LogoURL: rs.LogoURL, AccentStylesheet: rs.AccentStylesheet}
}

// ErrorPage is the data of error.html.
type ErrorPage struct {
	PageBase
	Status  int
	Code    string
	Heading string
	Message string
	Retry   bool // the condition is temporary: offer to try again
}

// RefusalPage is the data of an admission kind's own refusal page (soldout.html, bidtoolow.html): the
// error, its JSON fields (such as highest_amount) and where "back" leads.
type RefusalPage struct {
	ErrorPage
	Fields map[string]any
	Back   string
}

// BackPath is the same-site page the visitor came from (its Referer), for a "back" link; "/" when
// the Referer is missing or another site's.
func BackPath(r *http.Request) string {
	ref, err := url.Parse(r.Referer())
	if err != nil || ref.Host != r.Host || (ref.Scheme != "http" && ref.Scheme != "https") {
		return "/"
	}
	return SafeReturn(ref.RequestURI())
}

// Error answers with e: an HTML page for browser navigations (IsNavigation), the JSON error body
// otherwise. Any
// other error is answered as 500 INTERNAL. The cause, if any, is logged, never shown.
func (rs *Responder) Error(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = ErrInternal.Because(err)
	}
	info := RequestFrom(r.Context())
	info.Code = e.Code
	if e.Cause != nil {
		level := slog.LevelInfo
		if e.Status >= 500 {
			level = slog.LevelWarn
		}
		// The cause may quote what the visitor sent (a refused field, a path): clipped.
		info.Logger().Log(r.Context(), level, "request refused", "route", info.Route, "status", e.Status, "code", e.Code,
			"cause", ClipErr(e.Cause))
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	if e.Code == ErrPersistedQueryNotFound.Code {
		// The one answer automatic persisted query clients resend the document on, whatever the route's
		// refusal settings say (Apollo Server's, status and message included), for any client.
		WriteJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{
			"message": e.Message, "extensions": map[string]any{"code": e.Code}}}})
		return
	}
	if IsNavigation(r) {
		base := rs.Base(r)
		data := ErrorPage{
			PageBase: base, Status: e.Status, Code: e.Code, Heading: heading(base.Text, e.Status), Message: e.Message,
			Retry: e.Status == http.StatusTooManyRequests || e.Status >= 500,
		}
		if key := "msg." + e.Code; base.Text.Has(key) {
			data.Message = base.Text.T(key)
		}
		if key := "head." + e.Code; base.Text.Has(key) {
			data.Heading = base.Text.T(key)
		}
		rs.Page(w, r, e.Status, "error.html", data)
		return
	}
	if s := info.RefusalStatus; s != 0 && e.Status >= 400 && e.Status < 500 {
		// refusal.status: for clients that drop the bodies of 4xx answers. The code stays in the body
		// and in the metrics' labels.
		c := *e
		c.Status = s
		e = &c
	}
	if info.Refusal != nil && rs.refusal(w, r, info, e) {
		return
	}
	if info.GraphQL {
		WriteJSON(w, e.Status, graphQLBody(e))
		return
	}
	body := make(map[string]any, 3+len(e.Fields))
	for k, v := range e.Fields {
		body[k] = v
	}
	body["success"], body["error"], body["message"] = false, e.Code, e.Message
	WriteJSON(w, e.Status, body)
}

// graphQLBody is a refusal in the shape GraphQL clients read (docs/reference.md "GraphQL routes"): no
// data, one error whose extensions carry the code and the code's fields (wait_url, queue_position,
// remaining_stock, ...).
func graphQLBody(e *Error) map[string]any {
	ext := make(map[string]any, 1+len(e.Fields))
	for k, v := range e.Fields {
		ext[k] = v
	}
	ext["code"] = e.Code
	return map[string]any{"data": nil, "errors": []any{map[string]any{"message": e.Message, "extensions": ext}}}
}

// refusal answers e with the route's refusal.json template (routes[].refusal.json), in the shape the
// shop's own scripts read; false if the template fails or renders invalid JSON (edgeq check renders
// it with hostile values, but a visitor's may still find a way), and the standard body is sent. The
// failure is logged once per template: a visitor repeating the request must not flood the log.
func (rs *Responder) refusal(w http.ResponseWriter, r *http.Request, info *Request, e *Error) bool {
	d := config.RefusalData{Status: e.Status, Code: e.Code, Message: e.Message, Fields: make(map[string]string, len(e.Fields))}
	for k, v := range e.Fields {
		d.Fields[k] = fmt.Sprint(v)
	}
	body, err := config.RenderRefusal(info.Refusal, d)
	if err == nil && !json.Valid(body) {
		err = fmt.Errorf("rendered invalid JSON for %s: %s", e.Code, ClipLog(string(body)))
	}
	if err != nil {
		if _, logged := rs.brokenRefusals.LoadOrStore(info.Refusal, true); !logged {
			info.Logger().Error("refusal.json template failed; the standard body is sent (logged once per route)",
				"route", info.Route, "code", e.Code, "error", ClipErr(err))
		}
		return false
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
	return true
}

// Page renders a page template with status and the default Content-Security-Policy.
func (rs *Responder) Page(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	rs.PageCSP(w, r, status, page, data, DefaultCSP)
}

// PageCSP renders a page with its own Content-Security-Policy (pages that load the Turnstile widget),
// compressed for clients that accept it.
// A template failure (only possible with an operator's override that fails at run time) is logged and
// answered with a plain 500.
func (rs *Responder) PageCSP(w http.ResponseWriter, r *http.Request, status int, page string, data any, csp string) {
	buf := pageBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledPage {
			buf.Reset()
			pageBuffers.Put(buf)
		}
	}()
	if err := rs.Pages.Render(buf, page, data); err != nil {
		RequestFrom(r.Context()).Logger().Error("page rendering failed", "page", page, "error", ClipErr(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	PageSecurityHeaders(w.Header(), csp)
	// Compressed here, not only under compression.Handler: error and refusal pages are also sent on
	// the shop's routes, where nothing else compresses.
	compression.WriteBody(w, r, status, buf.Bytes())
}

// pageBuffers hold the buffers pages are rendered into: a page is a few kilobytes, rendered for every
// visitor who opens the waiting page, and growing a new buffer to that size takes several allocations.
// A buffer grown past maxPooledPage (an operator's outsized template) is left to the collector.
var pageBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledPage = 64 << 10

// heading is the page title of an error status, in the page's language: the status's own heading,
// else a general one (never the English status text on a page in another language).
func heading(t templates.Text, status int) string {
	if key := "error." + strconv.Itoa(status); t.Has(key) {
		return t.T(key)
	}
	if status >= 500 {
		return t.T("error.500")
	}
	return t.T("error.other")
}
