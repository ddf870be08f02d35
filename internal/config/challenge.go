package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Challenge chooses the bot check that queues[].turnstile (at join) and routes[].turnstile (on a
// route) ask for. Each provider registered with RegisterChallenge owns its settings under
// challenge.<name>; turnstile keeps its settings in the top-level turnstile: section.
type Challenge struct {
	Provider string `yaml:"provider"`
	// Settings holds each registered provider's settings by name, defaults filled in and the file's
	// challenge.<name> section decoded over them (environment overrides included).
	Settings map[string]ChallengeSettings `yaml:"-"`
}

// ChallengeSettings is a provider's own configuration: a pointer to a struct whose yaml tags name its
// keys, decoded like the rest of the file. Problems lists what is wrong with it, paths relative to
// the section; inUse tells whether the provider is the configured one and some queue or route asks
// for a check, so that settings only a running provider needs are required only then.
type ChallengeSettings interface {
	Problems(inUse bool) []Problem
}

var (
	challengeMu sync.RWMutex
	// turnstile's settings are the top-level turnstile: section, older than providers: its name is
	// known here so that a file naming it validates with or without the provider linked in.
	challengeProviders = map[string]func() ChallengeSettings{"turnstile": nil}
)

// RegisterChallenge adds a bot-check provider's name and, unless settings is nil, its section
// (settings returns its defaults). It is called from the provider's init; a name registered twice
// with settings panics.
func RegisterChallenge(name string, settings func() ChallengeSettings) {
	challengeMu.Lock()
	defer challengeMu.Unlock()
	if prev, dup := challengeProviders[name]; (dup && (prev != nil || settings != nil)) || name == "" || name == "provider" {
		panic(fmt.Sprintf("config: challenge provider %q registered twice or reserved", name))
	}
	challengeProviders[name] = settings
}

// ChallengeProviders lists the registered providers' names, sorted.
func ChallengeProviders() []string {
	challengeMu.RLock()
	defer challengeMu.RUnlock()
	names := make([]string, 0, len(challengeProviders))
	for name := range challengeProviders {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// defaultChallenge is the provider section's defaults: turnstile, and every registered provider's
// settings at their defaults.
func defaultChallenge() Challenge {
	c := Challenge{Provider: "turnstile", Settings: map[string]ChallengeSettings{}}
	challengeMu.RLock()
	defer challengeMu.RUnlock()
	for name, settings := range challengeProviders {
		if settings != nil {
			c.Settings[name] = settings()
		}
	}
	return c
}

var challengeType = reflect.TypeFor[Challenge]()

// decodeChallenge decodes challenge: provider, and each provider's section into its settings.
func (d *decoder) decodeChallenge(path string, in any, out reflect.Value) {
	m, ok := in.(map[string]any)
	if !ok {
		d.fail(path, "must be a mapping of keys, not %s", describe(in))
		return
	}
	c := out.Addr().Interface().(*Challenge)
	for key, value := range m {
		if key == "provider" {
			d.decode(join(path, key), value, reflect.ValueOf(&c.Provider).Elem())
			continue
		}
		settings, known := c.Settings[key]
		if !known {
			d.fail(join(path, key), "unknown key")
			continue
		}
		d.decode(join(path, key), value, reflect.ValueOf(settings).Elem())
	}
}

// challengeKeys are the keys of the registered providers' sections, for the environment.
func challengeKeys(prefix string) []string {
	keys := []string{join(prefix, "provider")}
	for name, settings := range defaultChallenge().Settings {
		keys = append(keys, leafKeys(reflect.TypeOf(settings).Elem(), join(prefix, name))...)
	}
	slices.Sort(keys[1:])
	return keys
}

// checkChallenge validates the provider's name and every provider's settings.
func (cfg *Config) checkChallenge(c *check) {
	names := ChallengeProviders()
	if !slices.Contains(names, cfg.Challenge.Provider) {
		c.add("challenge.provider", "%q is not a bot-check provider (one of: %s)", cfg.Challenge.Provider, strings.Join(names, ", "))
	}
	wanted := len(cfg.checkUsers()) > 0
	for name, settings := range cfg.Challenge.Settings {
		for _, p := range settings.Problems(wanted && name == cfg.Challenge.Provider) {
			c.add(join("challenge."+name, p.Path), "%s", p.Reason)
		}
	}
}

// checkUsers names the queues and routes that ask for a bot check.
func (cfg *Config) checkUsers() []string {
	var wanted []string
	for i, q := range cfg.Queues {
		if q.Turnstile {
			wanted = append(wanted, fmt.Sprintf("queues[%d]", i))
		}
	}
	for i, r := range cfg.Routes {
		if r.Turnstile {
			wanted = append(wanted, fmt.Sprintf("routes[%d]", i))
		}
	}
	return wanted
}
