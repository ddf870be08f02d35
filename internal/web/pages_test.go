package web

import (
	"html/template"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/templates"
)

// shopperErrors are the errors a shopper's browser can get as a page (the admin API's own codes are
// left out, and so are the admission kinds' refusals: admission's TestKindCodes_EveryRefusalInEveryLanguage
// checks those).
var shopperErrors = []*Error{
	ErrInvalidRequest, ErrUnsupportedMedia, ErrPayloadTooLarge, ErrNotFound, ErrMethodNotAllowed,
	ErrStoreUnavailable, ErrOriginUnavailable, ErrOriginTimeout, ErrInternal, ErrBusy, ErrGateUnavailable,
	ErrQueueNotFound, ErrWaitingRoomNotFound, ErrRequestNotFound, ErrExpired, ErrRateLimited, ErrQueueRequired, ErrCrossSite,
	ErrNotOpen, ErrSoldOut, ErrQueueClosed, ErrInviteRequired, ErrInviteNotFound, ErrInviteUsed, ErrInviteExpired,
	ErrTurnstileRequired, ErrInvalidTurnstile, ErrOperationRefused, ErrTooManyPlaces, ErrMisdirected,
}

// Every error a shopper can meet reads in the shopper's language: its heading and message come from
// the language's file, never the English of the JSON body or Go's status text.
func TestErrorPage_EveryShopperErrorInEveryLanguage(t *testing.T) {
	rs := responder(t)
	for _, lang := range templates.Languages {
		text := templates.For(lang)
		for _, e := range shopperErrors {
			if !text.Has("msg." + e.Code) {
				t.Errorf("no msg.%s: its page would show the English %q", e.Code, e.Message)
				continue
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Accept", "text/html")
			r.Header.Set("Accept-Language", lang)
			rec := httptest.NewRecorder()
			rs.Error(rec, r, e)
			page := rec.Body.String()
			want := []string{
				`<html lang="` + lang + `"`,
				"<h1>" + template.HTMLEscapeString(heading(text, e.Status)) + "</h1>",
				template.HTMLEscapeString(text.T("msg." + e.Code)),
			}
			if text.Has("head." + e.Code) {
				want[1] = "<h1>" + template.HTMLEscapeString(text.T("head."+e.Code)) + "</h1>"
			}
			for _, w := range want {
				if !strings.Contains(page, w) {
					t.Errorf("%s %s: the page lacks %q:\n%s", lang, e.Code, w, page)
				}
			}
		}
	}
}
