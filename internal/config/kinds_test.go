package config_test

// config's tests run with the admission kinds linked, as edgeq links them (server/kinds.go): their
// codes (vocab.NewCode, from the kinds' packages and files) are among those `edgeq check` renders a
// route's refusal template with.
import _ "github.com/edgeq/edgeq/server"
