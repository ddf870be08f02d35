package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgeq/edgeq/internal/config"

	// The bot-check providers register their sections (challenge.<name>) as edgeq's binary does.
	_ "github.com/edgeq/edgeq/botcheck"
)

func load(t *testing.T, text string) (*config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(path)
}

// The providers' sections decode, take environment overrides, print and validate by their own rules;
// an unknown provider or key is a problem with its path.
func TestChallenge_ProvidersOwnTheirSections(t *testing.T) {
	if got := config.ChallengeProviders(); !slices.Equal(got, []string{"hcaptcha", "pow", "turnstile"}) {
		t.Fatalf("providers %v", got)
	}
	t.Run("a section, its environment and its printing", func(t *testing.T) {
		t.Setenv("EDGEQ_CHALLENGE_POW_TTL", "90s")
		cfg, err := load(t, "challenge:\n  provider: pow\n  pow: {difficulty: 18, adaptive: {max_difficulty: 22, joins_per_second: 50}}\n")
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := config.Print(cfg, &out); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"provider: \"pow\"", "difficulty: 18", "max_difficulty: 22", "joins_per_second: 50.0", "ttl: \"1m30s\"", "secret: \"\""} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("printed configuration lacks %q:\n%s", want, out.String())
			}
		}
		printed := filepath.Join(t.TempDir(), "printed.yaml")
		os.WriteFile(printed, []byte(out.String()), 0o600)
		if again, err := config.Load(printed); err != nil || again.Challenge.Settings["pow"] == nil {
			t.Fatalf("the printed configuration does not load back: %v", err)
		}

	})

	bad := []struct{ text, path string }{
		{"challenge: {provider: recaptcha}", "challenge.provider"},
		{"challenge: {pow: {difficulty: 33}}", "challenge.pow.difficulty"},
		{"challenge: {pow: {adaptive: {max_difficulty: 20}}}", "challenge.pow.adaptive"},
		{"challenge: {pow: {ttl: 1s}}", "challenge.pow.ttl"},
		{"challenge: {pow: {speed: 3}}", "challenge.pow.speed"},
		{"challenge: {captcha: {site_key: x}}", "challenge.captcha"},
		{"challenge: {hcaptcha: {on_error: maybe}}", "challenge.hcaptcha.on_error"},
		{"challenge: {provider: hcaptcha}\nqueues: [{id: drop, turnstile: true}]", "challenge.hcaptcha.site_key"},
	}
	for _, b := range bad {
		_, err := load(t, b.text)
		if !slices.ContainsFunc(config.Problems(err), func(p config.Problem) bool { return p.Path == b.path }) {
			t.Errorf("%q: problems %v, want one at %s", b.text, config.Problems(err), b.path)
		}
	}
	// Turnstile's keys are required only while it is the provider.
	if _, err := load(t, "challenge: {provider: pow}\nqueues: [{id: drop, turnstile: true}]"); err != nil {
		t.Errorf("pow needs no keys: %v", errors.Unwrap(err))
	}
}
