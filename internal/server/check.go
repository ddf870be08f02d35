package server

import (
	"errors"
	"html/template"
	"io"
	"log/slog"

	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/static"
	"github.com/edgeq/edgeq/templates"
)

// Check validates the configuration file at path the way start-up would, without opening the store or
// any listener: every key (config.Load), the token key files and the page templates. It returns the
// problems, each with its field path; err is for a file that cannot be read at all.
func Check(path string) ([]config.Problem, error) {
	cfg, err := config.Load(path)
	if err != nil {
		problems := config.Problems(err)
		if len(problems) == 1 && problems[0].Path == "" {
			return nil, errors.New(problems[0].Reason)
		}
		return problems, nil
	}
	var problems []config.Problem
	if _, err := loadKeys(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		problems = append(problems, config.Problem{Path: "tokens", Reason: err.Error()})
	}
	assets := static.New(cfg.Server.Prefix + "/static/")
	if _, err := templates.Parse(cfg.Pages.TemplatesDir, template.FuncMap{"static": assets.URL}); err != nil {
		problems = append(problems, config.Problem{Path: "pages.templates_dir", Reason: err.Error()})
	}
	return problems, nil
}
