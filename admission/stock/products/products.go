// Package products is the stock kind's part of the configuration file: the products: list, its
// defaults and its checks. It is a package of its own, importing no part of admission, so that the
// admission pipeline's own tests can build products without linking the kind.
package products

import (
	"strings"

	"github.com/edgeq/edgeq/internal/config"
)

// Section is the section's name, its key in the file.
const Section = "products"

// Kind is the stock kind's admission.type in a route.
const Kind = "stock"

func init() {
	config.RegisterSection(config.SectionSpec{Name: Section, Order: 10, Hot: true, New: func() config.Section { return &List{} }})
}

// Product is a stock-admitted item. Stock is only the initial stock: it is seeded when the product is
// absent from the store and never overwrites live stock.
type Product struct {
	ID           string `yaml:"id"`
	Stock        int64  `yaml:"stock"`
	PerUserLimit int    `yaml:"per_user_limit"`
	Name         string `yaml:"name"`
	Price        int64  `yaml:"price"`
	ImageURL     string `yaml:"image_url"`
}

// Defaults sets the fields a product of the file may leave out.
func (p *Product) Defaults() { p.PerUserLimit = 1 }

// List is the products: section.
type List []Product

// Check checks every product (config.Owners).
func (l *List) Check(c config.Checker, cfg *config.Config) {
	config.Owners(c, cfg, Section, Kind, *l, func(p Product) string { return p.ID }, check)
}

// Validate checks one product with the rules of the file (for products created through the admin
// API); problem paths start at the product's own keys.
func Validate(p Product) error {
	return config.ValidateOne(func(c config.Checker) { check(c, "", p) })
}

func check(c config.Checker, p string, pr Product) {
	c.ID(p+".id", pr.ID)
	c.AtLeast(p+".stock", pr.Stock, 0)
	c.AtLeast(p+".per_user_limit", int64(pr.PerUserLimit), 1)
	c.AtLeast(p+".price", pr.Price, 0)
	if len(pr.Name) > 200 {
		c.Add(p+".name", "must be at most 200 characters")
	}
	if pr.ImageURL != "" && !strings.HasPrefix(pr.ImageURL, "/") {
		c.HTTPURL(p+".image_url", pr.ImageURL)
	}
}

// Of is cfg's products: (none when cfg is nil or has no such section, as a Config built by hand).
func Of(cfg *config.Config) []Product {
	l, _ := config.SectionOf[*List](cfg, Section)
	if l == nil {
		return nil
	}
	return *l
}

// With sets cfg's products: and returns cfg.
func With(cfg *config.Config, list ...Product) *config.Config {
	l := List(list)
	return cfg.WithSection(Section, &l)
}
