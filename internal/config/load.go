package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/viper"
)

// EnvPrefix starts every environment variable that overrides a key: EDGEQ_REDIS_ADDR sets redis.addr.
const EnvPrefix = "EDGEQ"

// EnvName returns the environment variable that overrides a dotted key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load reads the YAML file at path (none when path is ""), applies EDGEQ_* environment overrides over it
// and defaults under it, and validates the result. The error lists every problem found, each as a
// Problem on its own line (errors.Join), so `edgeq check` can print them all.
func Load(path string) (*Config, error) {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	// A variable that is set wins even when empty, so an operator can clear a key from the file.
	v.AllowEmptyEnv(true)
	// Viper only consults the environment for keys it has been told about, so bind every key.
	keys := append(leafKeys(reflect.TypeFor[Config](), ""), challengeKeys("challenge")[1:]...)
	for _, key := range append(keys, sectionKeys()...) {
		if err := v.BindEnv(key); err != nil {
			return nil, fmt.Errorf("config: bind %s: %w", key, err)
		}
	}
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}

	cfg := Default()
	d := &decoder{}
	tree := normalize(v.AllSettings()).(map[string]any)
	d.decodeSections(tree, cfg)
	d.decode("", tree, reflect.ValueOf(cfg).Elem())
	cfg.fillDerived()
	problems := d.problems
	for _, p := range cfg.problems() {
		// A value that could not be decoded was left at its default; do not report it twice.
		if !slices.ContainsFunc(d.problems, func(dp Problem) bool { return dp.Path == p.Path }) {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, asError(problems)
	}
	return cfg, nil
}

// fillDerived sets the defaults that depend on other keys.
func (c *Config) fillDerived() {
	for i := range c.Queues {
		if c.Queues[i].Title == "" {
			c.Queues[i].Title = c.Queues[i].ID
		}
	}
}

// Validate reports every semantic problem of c (values out of range, unknown references, bad patterns),
// each with its field path, joined with errors.Join; nil when c is usable.
func (c *Config) Validate() error {
	if p := c.problems(); len(p) > 0 {
		return asError(p)
	}
	return nil
}

func asError(problems []Problem) error {
	sortProblems(problems)
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// Problems unpacks an error from Load or Validate into its problems; other errors become one Problem
// with an empty path.
func Problems(err error) []Problem {
	if err == nil {
		return nil
	}
	var out []Problem
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	var p Problem
	if errors.As(err, &p) {
		return []Problem{p}
	}
	return []Problem{{Reason: err.Error()}}
}

// OneLine renders an error from Load or Validate on a single line, for start-up failures.
func OneLine(err error) string {
	var parts []string
	for _, p := range Problems(err) {
		parts = append(parts, p.Error())
	}
	return strings.Join(parts, "; ")
}
