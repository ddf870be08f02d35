package server

import (
	"errors"
	"html/template"
	"log/slog"
	"strings"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

// Check validates the configuration file at path the way start-up would, without opening the store or
// any listener: every key (config.Load), the token key files, the TLS certificate files and the page
// templates. It returns the problems, each with its field path, and the warnings start-up would log
// about a file that loads (see warnings); err is for a file that cannot be read at all.
func Check(path string) (problems []config.Problem, warns []string, err error) {
	problems, advice, err := Review(path)
	return problems, advice.Warnings, err
}

// Advice is what `edgeq check` says about a file besides its problems, as start-up logs it: Warnings
// (warnings: what an operator should hear about before a sale) and Notes (notes: trade-offs a setting
// makes, worth knowing).
type Advice struct {
	Warnings, Notes []string
}

// Review is Check with the notes too.
func Review(path string) (problems []config.Problem, advice Advice, err error) {
	cfg, err := config.Load(path)
	if err != nil {
		problems := config.Problems(err)
		if len(problems) == 1 && problems[0].Path == "" {
			return nil, Advice{}, errors.New(problems[0].Reason)
		}
		return problems, Advice{}, nil
	}
	if _, err := loadKeys(cfg, slog.New(slog.DiscardHandler)); err != nil {
		problems = append(problems, problemAt("tokens", err))
	}
	if _, err := loadCertificates(cfg, slog.New(slog.DiscardHandler)); err != nil {
		problems = append(problems, problemAt("server.tls", err))
	}
	if _, err := acmeRoots(cfg); err != nil {
		problems = append(problems, problemAt("server.tls", err))
	}
	assets := static.New(cfg.Server.Prefix + "/static/")
	if _, err := templates.Parse(cfg.Pages.TemplatesDir, template.FuncMap{"static": assets.URL}); err != nil {
		problems = append(problems, problemAt("pages.templates_dir", err))
	}
	return problems, Advice{Warnings: warnings(cfg), Notes: notes(cfg)}, nil
}

// problemAt makes a problem under path of an error, using the field the error names itself when it
// starts with one under path ("tokens.signing_key_file: open ..."), so the field is printed once.
func problemAt(path string, err error) config.Problem {
	msg := err.Error()
	if field, reason, ok := strings.Cut(msg, ": "); ok &&
		(field == path || strings.HasPrefix(field, path+".") || strings.HasPrefix(field, path+"[")) {
		return config.Problem{Path: field, Reason: reason}
	}
	return config.Problem{Path: path, Reason: msg}
}
