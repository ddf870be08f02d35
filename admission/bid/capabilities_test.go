package bid

import "github.com/edgeq/edgeq/admission"

// The parts of admission.Kind the bid kind has, checked when the tests compile: the pipeline finds
// them by type assertion, so a method that drifted from its interface (a rename of one side only)
// would otherwise be skipped without a word.
var (
	_ admission.Discoverer     = (*kind)(nil)
	_ admission.RunnerKind     = (*kind)(nil)
	_ admission.ConfiguredKind = (*kind)(nil)
	_ admission.MinedKind      = (*kind)(nil)
	_ admission.TabledKind     = (*kind)(nil)
	_ admission.CachingKind    = (*kind)(nil)
	_ admission.PagedKind      = (*kind)(nil)
	_ admission.ViewedKind     = (*kind)(nil)
	_ admission.SeededKind     = (*kind)(nil)
	_ admission.LedgeredKind   = (*kind)(nil)
	_ admission.ReportedKind   = (*kind)(nil)
)
