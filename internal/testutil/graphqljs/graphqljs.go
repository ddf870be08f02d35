// Package graphqljs runs the graphql-js referee of the tests (e2e/referee/graphqljs.mjs): a GraphQL shop
// executed by graphql-js, the executor under Apollo Server, GraphQL Yoga, Vendure and express-graphql,
// that answers which addItemToOrder calls it executed for each request. Tests send it the request bytes
// they give edgeq's reading and compare.
package graphqljs

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/proc"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// Readings are the ways the referee reads an HTTP request into GraphQL parameters (its Reading
// header), each as a family of servers does: graphql-http (the body alone, one operation),
// express-graphql (the URL's parameters before the body's, forms, inflated bodies), apollo (Apollo
// Server 4 as Vendure runs it: batches, automatic persisted queries, forms).
var Readings = []string{"graphql-http", "express-graphql", "apollo"}

// ReadingHeader is the request header that picks a reading.
const ReadingHeader = "Referee-Reading"

// Call is one addItemToOrder the referee executed, with its arguments as graphql-js coerced them.
type Call struct {
	ProductVariantID string `json:"productVariantId"`
	Quantity         int64  `json:"quantity"`
}

// Referee is a running referee.
type Referee struct {
	// URL is its address (http://127.0.0.1:PORT); every path is the GraphQL endpoint.
	URL string
}

// Start starts a referee executing schema (SDL) for the test's lifetime. Without Node.js or the
// graphql module (npm ci in e2e/) it fails the test in CI and skips it elsewhere, saying what to
// install.
func Start(tb testing.TB, schema string) *Referee {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	script := filepath.Join(root, "e2e", "referee", "graphqljs.mjs")
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "Node.js (apt-get install nodejs npm)")
	}
	if _, err := os.Stat(filepath.Join(root, "e2e", "node_modules", "graphql", "package.json")); err != nil {
		missing = append(missing, "the graphql module (npm ci in e2e/)")
	}
	if len(missing) > 0 {
		msg := "graphqljs: the graphql-js referee needs " + strings.Join(missing, " and ")
		if storetest.InCI() {
			tb.Fatal(msg + " (CI is set: a missing dependency is a failure)")
		}
		tb.Skip(msg + ": skipped outside CI")
	}
	dir := tb.TempDir()
	schemaFile, portFile := filepath.Join(dir, "schema.graphql"), filepath.Join(dir, "port")
	if err := os.WriteFile(schemaFile, []byte(schema), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("node", script, "--schema", schemaFile, "--port-file", portFile)
	var port int
	p, err := proc.StartReady(cmd, 20*time.Second, 20*time.Millisecond, func() error {
		raw, err := os.ReadFile(portFile)
		if err != nil {
			return err
		}
		port, err = strconv.Atoi(string(raw))
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Kill)
	return &Referee{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// Calls reads the calls a referee's answer reports. An answer without the report came from Node's HTTP
// parser, which refused the request before the referee saw it: nothing was executed.
func Calls(resp *http.Response) ([]Call, error) {
	report, ok := resp.Header["Referee-Calls"]
	if !ok {
		return nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(report[0])
	if err != nil {
		return nil, fmt.Errorf("Referee-Calls: %w", err)
	}
	var calls []Call
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, fmt.Errorf("Referee-Calls %q: %w", raw, err)
	}
	return calls, nil
}

// moduleRoot is the directory of go.mod above the working directory (a test's package directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("graphqljs: no go.mod above the working directory")
		}
		dir = parent
	}
}
