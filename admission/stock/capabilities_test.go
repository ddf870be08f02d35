package stock

import "github.com/edgeq/edgeq/admission"

// The capabilities the stock kind has, checked when the tests compile: the pipeline finds
// them by type assertion, so a method that drifted from its interface (a rename of one side only)
// would otherwise be skipped without a word.
var (
	_ admission.Holder         = (*stockKind)(nil)
	_ admission.GroupedKind    = (*stockKind)(nil)
	_ admission.BusyKind       = (*stockKind)(nil)
	_ admission.RunnerKind     = (*stockKind)(nil)
	_ admission.SweepingKind   = (*stockKind)(nil)
	_ admission.ConfiguredKind = (*stockKind)(nil)
	_ admission.MinedKind      = (*stockKind)(nil)
	_ admission.TabledKind     = (*stockKind)(nil)
	_ admission.CachingKind    = (*stockKind)(nil)
	_ admission.PagedKind      = (*stockKind)(nil)
	_ admission.ViewedKind     = (*stockKind)(nil)
	_ admission.SeededKind     = (*stockKind)(nil)
	_ admission.LedgeredKind   = (*stockKind)(nil)
	_ admission.ReportedKind   = (*stockKind)(nil)
)
