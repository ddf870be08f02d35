package graphql

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Seen is what a replica remembers of the documents clients sent. By hash: the documents sent with
// their SHA-256 (automatic persisted queries), so that a later request naming only the hash is read as
// the shop will execute it; a document is remembered only when its hash is the one the client named, so
// a client cannot teach edgeq a harmless document for the hash of a guarded one. By text: the parsed
// form of recent documents (a shop's storefront sends the same few documents over and over; the parsed
// tree is only read, so requests share it). Bounded (SeenEntries documents of at most SeenMaxBytes by
// hash, ParsedEntries by text); safe for concurrent use.
type Seen struct {
	cache  *lru.Cache[string, string]
	parsed *lru.Cache[string, *parsed]
}

// SeenEntries and SeenMaxBytes bound the documents Seen holds by hash (32 MiB at most); ParsedEntries
// the parsed documents, each of at most SeenMaxBytes of text.
const (
	SeenEntries   = 1024
	SeenMaxBytes  = 32 << 10
	ParsedEntries = 256
)

// NewSeen returns an empty Seen.
func NewSeen() *Seen {
	c, err := lru.New[string, string](SeenEntries)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	p, err := lru.New[string, *parsed](ParsedEntries)
	if err != nil {
		panic(err)
	}
	return &Seen{cache: c, parsed: p}
}

// learn remembers text under hash when hash is its SHA-256 (hex, lower case) and reports whether it is.
func (s *Seen) learn(hash, text string) bool {
	if hash != sha256Hex(text) {
		return false
	}
	if s != nil && len(text) <= SeenMaxBytes {
		s.cache.Add(hash, text)
	}
	return true
}

func (s *Seen) lookup(hash string) (string, bool) {
	if s == nil {
		return "", false
	}
	return s.cache.Get(hash)
}

func sha256Hex(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// LoadDocuments reads a trusted documents file (routes[].graphql.documents): a JSON object mapping ids
// to documents ({"<id>": "mutation AddItem ..."}, as Relay and GraphQL Code Generator write them), or an
// Apollo persisted query manifest ({"format": "apollo-persisted-query-manifest", "operations": [{"id",
// "body"}]}). Every document must parse.
func LoadDocuments(path string) (map[string]string, error) {
	body, err := os.ReadFile(path) //nolint:gosec // a file the configuration names, by the operator
	if err != nil {
		return nil, err
	}
	var manifest struct {
		Format     string `json:"format"`
		Operations []struct {
			ID   string `json:"id"`
			Body string `json:"body"`
		} `json:"operations"`
	}
	docs := map[string]string{}
	if err := json.Unmarshal(body, &manifest); err == nil && manifest.Format != "" {
		for _, op := range manifest.Operations {
			docs[op.ID] = op.Body
		}
	} else if err := json.Unmarshal(body, &docs); err != nil {
		return nil, fmt.Errorf("%s: neither {\"<id>\": \"<document>\"} nor an Apollo persisted query manifest: %w", path, err)
	}
	for id, text := range docs {
		if id == "" {
			return nil, fmt.Errorf("%s: a document with an empty id", path)
		}
		if p := parse(text); p.err != nil {
			return nil, fmt.Errorf("%s: document %q: %s", path, id, p.reason())
		}
	}
	return docs, nil
}
