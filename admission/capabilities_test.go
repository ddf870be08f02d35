package admission

// The capabilities each kind of this package has, checked when the tests compile: the pipeline finds
// them by type assertion, so a method that drifted from its interface (a rename of one side only)
// would otherwise be skipped without a word.
var (
	// stock
	_ Holder         = (*stockKind)(nil)
	_ GroupedKind    = (*stockKind)(nil)
	_ BusyKind       = (*stockKind)(nil)
	_ RunnerKind     = (*stockKind)(nil)
	_ SweepingKind   = (*stockKind)(nil)
	_ ConfiguredKind = (*stockKind)(nil)
	_ MinedKind      = (*stockKind)(nil)
	_ TabledKind     = (*stockKind)(nil)
	_ CachingKind    = (*stockKind)(nil)
	_ PagedKind      = (*stockKind)(nil)
	_ ViewedKind     = (*stockKind)(nil)
	_ SeededKind     = (*stockKind)(nil)
	_ LedgeredKind   = (*stockKind)(nil)
	_ ReportedKind   = (*stockKind)(nil)
	// bid
	_ Discoverer     = (*bidKind)(nil)
	_ RunnerKind     = (*bidKind)(nil)
	_ ConfiguredKind = (*bidKind)(nil)
	_ MinedKind      = (*bidKind)(nil)
	_ TabledKind     = (*bidKind)(nil)
	_ CachingKind    = (*bidKind)(nil)
	_ PagedKind      = (*bidKind)(nil)
	_ ViewedKind     = (*bidKind)(nil)
	_ SeededKind     = (*bidKind)(nil)
	_ LedgeredKind   = (*bidKind)(nil)
	_ ReportedKind   = (*bidKind)(nil)
)
