package bid

// The tests' routes (edgetest.Routes) include the stock kind's, so their binary links it as edgeq does.
import _ "github.com/edgeq/edgeq/admission/stock"
