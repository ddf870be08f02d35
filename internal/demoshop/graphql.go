package demoshop

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// graphql: POST /api/graphql with {"query": "...", "variables": {...}}, the shop's one read endpoint
// (its page script asks it for the cart badge and live stock). It is GraphQL-like: it reads the
// query's top-level fields, with aliases and arguments (literals or $variables), and answers each with
// the whole object; sub-selections are accepted and not applied. Fields: products, product(id | sku |
// slug), cart(id). Mutations are not served here: the cart has its REST API.
func (s *Shop) graphql(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := readJSON(r, &req); err != nil {
		gqlError(w, "the body must be JSON: {\"query\": \"...\", \"variables\": {...}}")
		return
	}
	fields, err := parseQuery(req.Query, req.Variables)
	if err != nil {
		gqlError(w, err.Error())
		return
	}
	data := map[string]any{}
	s.mu.Lock()
	for _, f := range fields {
		v, err := s.resolve(f)
		if err != nil {
			s.mu.Unlock()
			gqlError(w, err.Error())
			return
		}
		data[f.alias] = v
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

func gqlError(w http.ResponseWriter, message string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []map[string]string{{"message": message}}})
}

type productJSON struct {
	ID    string `json:"id"`
	SKU   string `json:"sku"`
	Slug  string `json:"slug"`
	Name  string `json:"name"`
	Price string `json:"price"`
	Stock int    `json:"stock"`
}

func productView(p *product) productJSON {
	return productJSON{ID: p.ID, SKU: p.SKU, Slug: p.Slug, Name: p.Name, Price: formatMoney(p.Price), Stock: p.Stock}
}

// resolve answers one top-level field (nil when the object does not exist). Callers hold s.mu.
func (s *Shop) resolve(f gqlField) (any, error) {
	switch f.name {
	case "products":
		out := []productJSON{}
		for _, p := range s.products {
			out = append(out, productView(p))
		}
		return out, nil
	case "product":
		p := s.findProduct(func(p *product) bool {
			return (f.args["id"] != "" && p.ID == f.args["id"]) || (f.args["sku"] != "" && p.SKU == f.args["sku"]) ||
				(f.args["slug"] != "" && p.Slug == f.args["slug"])
		})
		if p == nil {
			return nil, nil
		}
		return productView(p), nil
	case "cart":
		c := s.carts[f.args["id"]]
		if c == nil {
			return nil, nil
		}
		return s.cartView(c), nil
	}
	return nil, fmt.Errorf("cannot query field %q on type Query", f.name)
}

type gqlField struct {
	alias, name string
	args        map[string]string
}

// parseQuery reads the top-level fields of a query document.
func parseQuery(query string, vars map[string]any) ([]gqlField, error) {
	toks, err := tokenize(query)
	if err != nil {
		return nil, err
	}
	p := &gqlParser{toks: toks, vars: vars}
	if first := p.peek(); first == "mutation" || first == "subscription" {
		return nil, fmt.Errorf("%ss are not served by this endpoint", first)
	}
	if p.peek() == "query" {
		p.next()
		if p.peek() != "{" && p.peek() != "(" {
			p.next() // operation name
		}
		if p.peek() == "(" {
			p.skip("(", ")") // variable definitions
		}
	}
	if p.next() != "{" {
		return nil, errors.New("syntax error: a query starts with {")
	}
	var fields []gqlField
	for p.peek() != "}" {
		name := p.next()
		if !isName(name) {
			return nil, fmt.Errorf("syntax error at %q", name)
		}
		f := gqlField{alias: name, name: name, args: map[string]string{}}
		if p.peek() == ":" {
			p.next()
			f.name = p.next()
		}
		if p.peek() == "(" {
			p.next()
			for p.peek() != ")" {
				arg := p.next()
				if !isName(arg) || p.next() != ":" {
					return nil, fmt.Errorf("syntax error in the arguments of %s", f.name)
				}
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				f.args[arg] = v
			}
			p.next()
		}
		if p.peek() == "{" {
			p.skip("{", "}")
		}
		fields = append(fields, f)
	}
	if len(fields) == 0 {
		return nil, errors.New("the query selects no field")
	}
	return fields, nil
}

type gqlParser struct {
	toks []string
	pos  int
	vars map[string]any
}

// peek and next return "" at the end, which no rule accepts.
func (p *gqlParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *gqlParser) next() string {
	t := p.peek()
	p.pos++
	return t
}

// skip passes a balanced open...close group.
func (p *gqlParser) skip(open, close string) {
	depth := 0
	for t := p.next(); t != ""; t = p.next() {
		switch t {
		case open:
			depth++
		case close:
			depth--
		}
		if depth == 0 {
			return
		}
	}
}

// value reads an argument: a "string", a number or name, or a $variable.
func (p *gqlParser) value() (string, error) {
	t := p.next()
	switch {
	case strings.HasPrefix(t, `"`):
		return strconv.Unquote(t)
	case strings.HasPrefix(t, "$"):
		v, ok := p.vars[t[1:]]
		if !ok {
			return "", fmt.Errorf("variable %s is not given", t)
		}
		return fmt.Sprint(v), nil
	case t != "" && !strings.ContainsAny(t, "{}():"):
		return t, nil
	}
	return "", fmt.Errorf("syntax error at %q", t)
}

// tokenize splits a document into names, numbers, $variables, "strings" and punctuation; commas and
// comments are insignificant, as in GraphQL.
func tokenize(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case strings.IndexByte("{}():!=[]", c) >= 0:
			toks = append(toks, string(c))
			i++
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, errors.New("syntax error: unterminated string")
			}
			toks = append(toks, s[i:j+1])
			i = j + 1
		case c == '$' || c == '-' || c == '_' || isAlnum(c):
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] == '.' || s[j] == '-' || isAlnum(s[j])) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			return nil, fmt.Errorf("syntax error: unexpected %q", c)
		}
	}
	return toks, nil
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isName(t string) bool {
	return t != "" && (t[0] == '_' || isAlnum(t[0])) && !strings.ContainsAny(t, "$.-") && (t[0] < '0' || t[0] > '9')
}
