package admission_test

// The admission tests' routes include the bid kind's, so their binary links it: a kind's package
// imports admission, which is why only an external test file can import it.
import (
	_ "github.com/edgeq/edgeq/admission/bid"
)
