package admission

// The capabilities each kind of this package has, checked when the tests compile: the pipeline finds
// them by type assertion, so a method that drifted from its interface (a rename of one side only)
// would otherwise be skipped without a word.
var (
	// stock (the bid kind's are in its package)
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
)
