package server

// The admission kinds of its own package edgeq is built with: each registers itself from its init
// (docs/architecture.md "Adding an admission kind"), so an import is all it takes to link one.
import (
	_ "github.com/edgeq/edgeq/admission/bid"
	_ "github.com/edgeq/edgeq/admission/stock"
)
