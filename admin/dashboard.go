package admin

import (
	"bytes"
	"html/template"
	"net/http"

	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

// dashboardCSP keeps the dashboard to its own origin: its script and style come from the binary, its
// data from the admin API, and nothing may frame it.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// NewDashboard returns the handler of GET /dashboard (the page) and /dashboard/static/* (its script
// and style, versioned). The page holds no data: its script reads the admin API every second with the
// browser's Basic credentials and draws the charts.
func NewDashboard(brand string) (http.Handler, error) {
	assets := static.New("/dashboard/static/")
	page, err := templates.Dashboard(template.FuncMap{"static": assets.URL})
	if err != nil {
		return nil, err
	}
	var html bytes.Buffer
	if err := page.Execute(&html, map[string]any{"Brand": brand, "Header": DashboardHeader}); err != nil {
		return nil, err
	}
	body := html.Bytes()
	mux := http.NewServeMux()
	mux.Handle("GET /dashboard/static/", assets)
	mux.HandleFunc("GET /dashboard", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", dashboardCSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(body)
	})
	return mux, nil
}
