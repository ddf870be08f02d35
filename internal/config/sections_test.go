package config_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"
	"github.com/edgeq/edgeq/admission/stock/products"
	"github.com/edgeq/edgeq/internal/config"
)

// The kinds' sections (products:, auctions:, auctions_source:) are decoded with their items'
// defaults, like the file's own lists.
func TestSections_ItemDefaultsAndSettings(t *testing.T) {
	cfg, err := config.Load("testdata/good/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ps := products.Of(cfg)
	if len(ps) != 2 || ps[1].ID != "2" || ps[1].PerUserLimit != 2 || ps[0].PerUserLimit != 1 || ps[1].ImageURL != "/img/b.png" {
		t.Errorf("products = %+v", ps)
	}
	if src := auctions.SourceOf(cfg); src.URL != "http://shop.internal/api/auctions/{id}" || src.Timeout != 100*time.Millisecond || src.CacheTTL != time.Minute {
		t.Errorf("auctions_source = %+v, want the url with the default timeout and cache_ttl", src)
	}
	as := auctions.Of(cfg)
	if len(as) != 2 || as[1].MinIncrement != "0.50" || as[0].MinIncrement != "1.00" || as[1].Owner != "seller-9" ||
		!as[1].EndsAt.Equal(time.Date(2026, 12, 24, 17, 0, 0, 0, time.UTC)) {
		t.Errorf("auctions = %+v", as)
	}
}

// The environment sets a section as it sets the file's own keys: a struct's keys one by one, a list
// whole.
func TestSections_EnvironmentOverrides(t *testing.T) {
	t.Setenv("EDGEQ_AUCTIONS_SOURCE_TIMEOUT", "2s")
	t.Setenv("EDGEQ_PRODUCTS", `[{id: x, stock: 3}]`)
	cfg, err := config.Load("testdata/good/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if src := auctions.SourceOf(cfg); src.Timeout != 2*time.Second || src.URL != "http://shop.internal/api/auctions/{id}" {
		t.Errorf("auctions_source = %+v, want the file's url and the environment's timeout", src)
	}
	if ps := products.Of(cfg); len(ps) != 1 || ps[0] != (products.Product{ID: "x", Stock: 3, PerUserLimit: 1}) {
		t.Errorf("products = %+v, want the environment's list with its defaults", ps)
	}
}

// The kinds' sections are applied by a reload: a change is no restart key, and WithHot takes it.
func TestSections_AreHot(t *testing.T) {
	old := config.Default()
	next := config.Default()
	next = products.With(next, products.Product{ID: "p", Stock: 1, PerUserLimit: 1})
	next.Sections[auctions.SourceSection] = &auctions.Source{URL: "http://shop.internal/auctions/{id}", Timeout: time.Second}
	if got := config.RestartKeys(old, next); len(got) != 0 {
		t.Fatalf("hot sections reported as needing a restart: %v", got)
	}
	running := config.WithHot(old, next)
	if len(products.Of(running)) != 1 || auctions.SourceOf(running).Timeout != time.Second {
		t.Fatalf("WithHot did not take the sections: %+v", running.Sections)
	}
	if len(products.Of(old)) != 0 {
		t.Fatal("WithHot changed the running configuration's sections")
	}
}

// Printed, the sections follow routes: in their order, as in config.example.yaml, and read back as
// the same configuration.
func TestSections_PrintedAfterRoutes(t *testing.T) {
	cfg, err := config.Load("testdata/good/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := config.Print(cfg, &out); err != nil {
		t.Fatal(err)
	}
	var top []string
	for line := range strings.Lines(out.String()) {
		if line != "" && line[0] != ' ' && line[0] != '-' {
			top = append(top, strings.TrimSpace(line))
		}
	}
	at := slices.Index(top, "routes:")
	if at < 0 || !slices.Equal(top[at+1:at+4], []string{"products:", "auctions:", "auctions_source:"}) {
		t.Fatalf("top-level keys = %v, want products:, auctions:, auctions_source: right after routes:", top)
	}
	if !strings.Contains(out.String(), `image_url: "/img/b.png"`) {
		t.Errorf("a product's keys are missing from the output:\n%s", out.String())
	}
}

func TestRegisterSection_RefusesAKeyOfTheFileATakenNameAndCapitals(t *testing.T) {
	for _, name := range []string{"routes", products.Section, "", "Lottery"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterSection(%q) did not panic", name)
				}
			}()
			config.RegisterSection(config.SectionSpec{Name: name, New: func() config.Section { return &products.List{} }})
		}()
	}
}
