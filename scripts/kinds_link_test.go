package scripts

// The image's configuration is checked as edgeq reads it: with the admission kinds linked
// (server/kinds.go), which register the route fields they read (product, auction, ...).
import _ "github.com/edgeq/edgeq/server"
