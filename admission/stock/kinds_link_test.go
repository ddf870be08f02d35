package stock

// The tests' routes (edgetest.Routes) include the bid kind's, so their binary links it as edgeq does.
import _ "github.com/edgeq/edgeq/admission/bid"
