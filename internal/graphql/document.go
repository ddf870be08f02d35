package graphql

import (
	"context"
	"fmt"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/edgeq/edgeq/internal/web"
)

// The bounds of the work one request may cost (docs/reference.md "GraphQL routes"): reading and
// matching are linear in the request's size, and these keep the constant small.
const (
	// MaxTokens bounds the tokens of the distinct documents of one request (a storefront's largest
	// document is a few thousand tokens; parsing costs about 0.3 µs a token).
	MaxTokens = 50_000
	// MaxDepth bounds the nesting of a document's selection sets, arguments, lists and objects.
	MaxDepth = 64
	// MaxSpreads bounds the fragment spreads the matching of one request follows, over all its
	// operation requests (each batch item pays for the walk of the document it names).
	MaxSpreads = 1000
)

// budget is what is left of one request's work: bytes and tokens of distinct documents (the body's,
// and those persisted queries name: server.max_body_bytes and MaxTokens in all) and fragment spreads.
type budget struct {
	documentBytes int64
	tokens        int
	spreads       int
}

func newBudget(limit int64) budget {
	return budget{documentBytes: limit, tokens: MaxTokens, spreads: MaxSpreads}
}

// parsed is a document as edgeq reads it: its tree, or why it cannot be read, and its fragments and
// operations by name. Requests share it (Seen); it is never changed after it is made.
type parsed struct {
	tokens     int
	doc        *ast.QueryDocument
	err        *web.Error
	fragments  map[string]*ast.FragmentDefinition
	operations map[string][]*ast.OperationDefinition // by name, "" for the anonymous ones
}

// Errors of reading a document.
var (
	// ErrUnparsable: the document does not parse.
	ErrUnparsable = web.ErrInvalidRequest.With("field", "query")
	// ErrTooDeep: the document nests deeper than MaxDepth.
	ErrTooDeep = ErrUnparsable.With("problems", fmt.Sprintf("the document nests more than %d deep", MaxDepth))
	// ErrEscapedBlockQuote: a block string holds \""", which GraphQL parsers read differently.
	ErrEscapedBlockQuote = ErrUnparsable.With("problems", `a block string holds \""" (servers read it differently)`)
	// ErrTooManySpreads: matching the request would follow more than MaxSpreads fragment spreads.
	ErrTooManySpreads = ErrUnparsable.With("problems", fmt.Sprintf("more than %d fragment spreads to follow", MaxSpreads))
	// ErrTooMuchDocument: the documents the request sends or names exceed server.max_body_bytes.
	ErrTooMuchDocument = ErrUnparsable.With("problems", "the documents sent and named are larger than the body limit")
	// ErrTooManyTokens: the documents the request sends or names have more than MaxTokens tokens.
	ErrTooManyTokens = ErrUnparsable.With("problems", fmt.Sprintf("the documents sent and named have more than %d tokens", MaxTokens))
	// ErrCanceled: the client left while its request was read.
	ErrCanceled = web.ErrInvalidRequest.With("problems", "the request was canceled")
)

// document returns text (named ref in this request) parsed, once per request and once per replica
// while it is among the recent ones (Seen). Each distinct document is charged to the request's budget.
func (req *Request) document(text string, ref docRef) (*parsed, *web.Error) {
	if p, ok := req.parsed[ref]; ok {
		return p, nil
	}
	if req.budget.documentBytes -= int64(len(text)); req.budget.documentBytes < 0 {
		return nil, ErrTooMuchDocument
	}
	if e := canceled(req.ctx); e != nil {
		return nil, e
	}
	var p *parsed
	if req.seen != nil {
		p, _ = req.seen.parsed.Get(text)
	}
	if p == nil {
		tokens, e := scan(text)
		switch {
		case e != nil:
			p = &parsed{err: e}
		case tokens > req.budget.tokens:
			return nil, ErrTooManyTokens // not parsed at all
		default:
			p = parseScanned(text, tokens)
		}
		if req.seen != nil && len(text) <= SeenMaxBytes {
			req.seen.parsed.Add(text, p)
		}
	}
	if req.budget.tokens -= p.tokens; req.budget.tokens < 0 {
		return nil, ErrTooManyTokens
	}
	req.parsed[ref] = p
	return p, nil
}

// reason says why a document cannot be read, for a log or a start-up error.
func (p *parsed) reason() string {
	if p.err.Cause != nil {
		return p.err.Cause.Error()
	}
	if problem, ok := p.err.Fields["problems"].(string); ok {
		return problem
	}
	return p.err.Message
}

// parse reads a document: scanned first for what the parser does not bound (depth, tokens) or reads
// unlike other servers (\""" in a block string), then parsed with a real GraphQL parser.
func parse(text string) *parsed {
	tokens, e := scan(text)
	switch {
	case e != nil:
		return &parsed{err: e}
	case tokens > MaxTokens:
		return &parsed{tokens: tokens, err: ErrTooManyTokens}
	}
	return parseScanned(text, tokens)
}

// parseScanned parses a document scan passed.
func parseScanned(text string, tokens int) *parsed {
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: text}, MaxTokens)
	if err != nil {
		return &parsed{tokens: tokens, err: ErrUnparsable.Because(fmt.Errorf("the document does not parse: %v", err))}
	}
	p := &parsed{tokens: tokens, doc: doc, fragments: make(map[string]*ast.FragmentDefinition, len(doc.Fragments)),
		operations: make(map[string][]*ast.OperationDefinition, len(doc.Operations))}
	for _, f := range doc.Fragments {
		if _, dup := p.fragments[f.Name]; dup {
			// Invalid, and which one would a lenient server spread?
			return &parsed{tokens: tokens, err: ErrUnparsable.With("problems", "two fragments named "+f.Name)}
		}
		p.fragments[f.Name] = f
	}
	for _, op := range doc.Operations {
		p.operations[op.Name] = append(p.operations[op.Name], op)
	}
	return p
}

// scan reads text as GraphQL's lexer does (strings, block strings, comments, names, numbers,
// punctuators) for what the parser does not refuse or bound: nesting of { ( [ deeper than MaxDepth
// (the parser recurses once a level), a block string holding \""" (an escaped triple quote to
// graphql-js and gqlparser, the string's end to graph-gophers/graphql-go), and the number of tokens
// (at least the parser's count: "..." counts three). It is one pass; what does not lex is left to the
// parser.
func scan(text string) (tokens int, e *web.Error) {
	depth := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			continue
		case c == '#':
			for i < len(text) && text[i] != '\n' && text[i] != '\r' {
				i++
			}
			continue
		case c == '"' && strings.HasPrefix(text[i:], `"""`):
			end := strings.Index(text[i+3:], `"""`)
			if end < 0 {
				return tokens + 1, nil
			}
			end += i + 3
			if text[end-1] == '\\' {
				return tokens, ErrEscapedBlockQuote
			}
			i = end + 2
		case c == '"':
			for i++; i < len(text) && text[i] != '"' && text[i] != '\n' && text[i] != '\r'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
		case isNameByte(c):
			// A name, or a number ("1.5e-3" counts five: more than the parser's one).
			for i+1 < len(text) && isNameByte(text[i+1]) {
				i++
			}
		case c == '{' || c == '(' || c == '[':
			if depth++; depth > MaxDepth {
				return tokens, ErrTooDeep
			}
		case c == '}' || c == ')' || c == ']':
			depth--
		}
		tokens++
	}
	return tokens, nil
}

// analysisKey names one route's reading of one document for one operationName.
type analysisKey struct {
	route         *Route
	doc           docRef
	operationName string
}

// analysis is what a route reads of a document for an operationName: the operation the server
// executes (nil for none), the guarded root fields it selects, the fragment spreads the walk followed
// (charged again for every operation request that names the same document), or the refusal.
type analysis struct {
	op      *ast.OperationDefinition
	found   []*ast.Field
	spreads int
	err     *web.Error
}

// analyze returns rt's analysis of text for operationName, made once per request; every call charges
// the spreads it took to the request's budget.
func (req *Request) analyze(rt *Route, text string, ref docRef, operationName string) (*analysis, *web.Error) {
	key := analysisKey{rt, ref, operationName}
	a, ok := req.analyses[key]
	if !ok {
		p, e := req.document(text, ref)
		if e != nil {
			return nil, e
		}
		if p.err != nil {
			return nil, p.err
		}
		a = rt.analyze(p, text, operationName, req.budget.spreads)
		req.analyses[key] = a
	}
	if req.budget.spreads -= a.spreads; req.budget.spreads < 0 {
		return nil, ErrTooManySpreads
	}
	return a, a.err
}

// canceled reports the refusal of a request whose client left.
func canceled(ctx context.Context) *web.Error {
	if err := ctx.Err(); err != nil {
		return ErrCanceled.Because(err)
	}
	return nil
}

// occurrences counts the places text names name: not as part of a longer name (a name character
// after it, or a name before it; digits alone before it still count, as some lexers split "9name"),
// but anywhere else, in strings and comments too.
func occurrences(text, name string) int {
	n := 0
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], name)
		if j < 0 {
			break
		}
		start, end := i+j, i+j+len(name)
		i = end
		if end < len(text) && isNameByte(text[end]) {
			continue
		}
		run := start
		for run > 0 && isNameByte(text[run-1]) {
			run--
		}
		if run < start && !isDigit(text[run]) {
			continue
		}
		n++
	}
	return n
}

func isNameByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
