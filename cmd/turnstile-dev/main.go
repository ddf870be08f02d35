// Command turnstile-dev runs a stand-in for Cloudflare Turnstile (internal/testutil/turnstiletest): the
// siteverify endpoint and the widget script, for the demo and for tests with no internet. Point edgeq
// at it with turnstile.verify_url and turnstile.script_url.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/turnstiletest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8788", "address to listen on")
	flag.Parse()
	base := "http://" + *listen
	fmt.Fprintf(os.Stderr, `Turnstile stand-in on %s. Configure edgeq with:
  turnstile:
    site_key: %q
    secret_key: %q
    verify_url: "%s/turnstile/v0/siteverify"
    script_url: "%s/turnstile/v0/api.js"
Cloudflare's dummy keys work too (site key %s with secret %s).
`, base, turnstiletest.SiteKey, turnstiletest.Secret, base, base, turnstiletest.DummySiteKeyPass, turnstiletest.DummySecretPass)
	srv := &http.Server{Addr: *listen, Handler: turnstiletest.New(), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		slog.Error("turnstile-dev stopped", "error", err)
		os.Exit(1)
	}
}
