package raffle

// The raffle's section of the configuration file, drawings: the drawings open from the start,
// registered with config.RegisterSection and written to the store at start and on every reload, as
// stock's products: are.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/edgeq/edgeq/internal/config"
)

// Section is the section's key in the file.
const Section = "drawings"

// Listed is a drawing the file opens.
type Listed struct {
	ID string `yaml:"id"`
}

// Listing is the drawings: section.
type Listing []Listed

// Check checks every drawing (config.Owners).
func (l *Listing) Check(c config.Checker, cfg *config.Config) {
	config.Owners(c, cfg, Section, Type, *l, func(d Listed) string { return d.ID }, func(c config.Checker, p string, d Listed) {
		c.ID(p+".id", d.ID)
	})
}

func registerSection() {
	config.RegisterSection(config.SectionSpec{Name: Section, Order: 30, Hot: true, New: func() config.Section { return &Listing{} }})
}

// listed is cfg's drawings: (none without the section).
func listed(cfg *config.Config) []Listed {
	l, _ := config.SectionOf[*Listing](cfg, Section)
	if l == nil {
		return nil
	}
	return *l
}

// Seed opens the drawings the file lists; on a reload only those it did not list before.
func (k *kind) Seed(ctx context.Context, next, previous *config.Config) error {
	var errs []error
	for _, d := range listed(next) {
		if slices.Contains(listed(previous), d) {
			continue
		}
		if _, err := k.open(ctx, d.ID); err != nil {
			errs = append(errs, fmt.Errorf("drawing %s: %w", d.ID, err))
		}
	}
	return errors.Join(errs...)
}

// open opens a drawing: created reports whether it was not open already.
func (k *kind) open(ctx context.Context, id string) (created bool, err error) {
	created, err = k.s.Client().HSetNX(ctx, k.key(id, "drawing"), "entries", 0).Result()
	if err == nil {
		err = k.s.IndexOwner(ctx, k, id)
	}
	return created, err
}
