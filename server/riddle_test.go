package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/edgeq/edgeq/botcheck"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/web"
)

// riddle is a bot-check provider that exists only in this package's tests: one file and one
// registration, its own settings (challenge.riddle), fields, snippet and verification. Nothing else
// in edgeq names it; TestProviders_AFourthProviderIsOneFile runs the waiting room, the gate and the
// pages with it.
func init() {
	botcheck.Register(botcheck.Registration{
		Name:     "riddle",
		Settings: func() config.ChallengeSettings { return &riddleSettings{Question: "What is six times seven?"} },
		New: func(env botcheck.Env) (botcheck.Provider, error) {
			s := env.Settings.(*riddleSettings)
			if s.Answer == "" {
				return nil, nil // not configured
			}
			return &riddle{s: *s}, nil
		},
	})
}

type riddleSettings struct {
	Question string `yaml:"question"`
	Answer   string `yaml:"answer" secret:"true"`
}

func (s *riddleSettings) Problems(inUse bool) []config.Problem {
	if inUse && s.Answer == "" {
		return []config.Problem{{Path: "answer", Reason: "required while riddle is the provider"}}
	}
	return nil
}

type riddle struct{ s riddleSettings }

func (p *riddle) Fields() []botcheck.Field {
	return []botcheck.Field{{Name: "riddle_answer", Header: "Riddle-Answer"}}
}

func (p *riddle) Results() []string { return []string{"solved", "wrong", "missing"} }

var riddleSnippet = template.Must(template.New("riddle").Parse(
	`<label class="riddle">{{.Q}} <input name="riddle_answer" autocomplete="off"></label>`))

func (p *riddle) Widget(pg botcheck.Page) botcheck.Widget {
	var out strings.Builder
	if err := riddleSnippet.Execute(&out, map[string]string{"Q": p.s.Question}); err != nil {
		panic(err)
	}
	return botcheck.Widget{Snippet: template.HTML(out.String()), CSP: web.DefaultCSP}
}

func (p *riddle) Verify(_ context.Context, s botcheck.Submission) botcheck.Verdict {
	answer := s.Solution["riddle_answer"]
	switch {
	case answer == "":
		return botcheck.Failed("missing", nil)
	case subtle.ConstantTimeCompare([]byte(answer), []byte(p.s.Answer)) != 1:
		return botcheck.Failed("wrong", nil, fmt.Sprintf("%d characters", len(answer)))
	}
	return botcheck.Passed("solved", time.Now())
}
