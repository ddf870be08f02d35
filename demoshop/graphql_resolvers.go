package demoshop

// The resolvers of GraphQLSchema (graphql_schema.go): the shop's products and carts as the executor
// answers them.

import (
	"context"
	"slices"

	graphql "github.com/graph-gophers/graphql-go"
)

// that fields resolved later (and in parallel) read no shared state.
type gqlRoot struct{}

func (gqlRoot) Products(ctx context.Context) []*productResolver {
	s := visitOf(ctx).s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*productResolver, 0, len(s.products))
	for _, p := range s.products {
		out = append(out, &productResolver{productView(p)})
	}
	return out
}

func (gqlRoot) Product(ctx context.Context, args struct {
	ID   *graphql.ID
	SKU  *string
	Slug *string
}) *productResolver {
	s := visitOf(ctx).s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findProduct(func(p *product) bool {
		return (args.ID != nil && p.ID == string(*args.ID)) || (args.SKU != nil && p.SKU == *args.SKU) ||
			(args.Slug != nil && p.Slug == *args.Slug)
	})
	if p == nil {
		return nil
	}
	return &productResolver{productView(p)}
}

func (gqlRoot) Cart(ctx context.Context, args struct{ ID *graphql.ID }) *cartResolver {
	s := visitOf(ctx).s
	s.mu.Lock()
	defer s.mu.Unlock()
	if args.ID == nil {
		return nil
	}
	c := s.carts[string(*args.ID)]
	if c == nil {
		return nil
	}
	return s.cartSnapshot(c)
}

func (gqlRoot) ActiveOrder(ctx context.Context) *cartResolver {
	v := visitOf(ctx)
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	c := v.currentCart()
	if c == nil {
		return nil
	}
	return v.s.cartSnapshot(c)
}

func (gqlRoot) AddItemToOrder(ctx context.Context, args struct {
	ProductVariantID graphql.ID
	Quantity         int32
}) (*updateResult, error) {
	v := visitOf(ctx)
	s := v.s
	call := AddItemCall{ProductVariantID: string(args.ProductVariantID), Quantity: args.Quantity}
	if s.onAddItem != nil {
		defer s.onAddItem(call.ProductVariantID, call.Quantity) // after the unlock below
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v.calls = append(v.calls, call)
	if v.readOnly {
		return nil, v.refuse()
	}
	if args.Quantity < 0 {
		return negativeQuantity(), nil
	}
	p := s.bySKU(call.ProductVariantID)
	if p == nil {
		return nil, notFound("There is no product variant with the id %q.", call.ProductVariantID)
	}
	c := v.currentCart()
	if c == nil {
		c = s.newCart(v.w)
		v.cart = c
	}
	return s.orderResult(c, p, s.add(c, p.SKU, int(args.Quantity)))
}

func (gqlRoot) AdjustOrderLine(ctx context.Context, args struct {
	OrderLineID graphql.ID
	Quantity    int32
}) (*updateResult, error) {
	v := visitOf(ctx)
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if v.readOnly {
		return nil, v.refuse()
	}
	if args.Quantity < 0 {
		return negativeQuantity(), nil
	}
	c := v.currentCart()
	p := s.bySKU(string(args.OrderLineID))
	i := -1
	if c != nil && p != nil {
		i = slices.IndexFunc(c.Items, func(it cartItem) bool { return it.SKU == p.SKU })
	}
	if i < 0 {
		return nil, notFound("Your cart has no line with the id %q.", string(args.OrderLineID))
	}
	if args.Quantity == 0 {
		c.Items = slices.Delete(c.Items, i, i+1)
		return s.orderResult(c, p, nil)
	}
	// The new quantity is checked as adding it to the cart without this line would be.
	without := &cart{ID: c.ID, Items: slices.Delete(slices.Clone(c.Items), i, i+1)}
	if e := s.add(without, p.SKU, int(args.Quantity)); e != nil {
		return s.orderResult(c, p, e)
	}
	c.Items[i].Quantity = int(args.Quantity)
	return s.orderResult(c, p, nil)
}

// Error codes of the ErrorCode enum.
const (
	insufficientStock = "INSUFFICIENT_STOCK_ERROR"
	orderLimit        = "ORDER_LIMIT_ERROR"
	negativeQty       = "NEGATIVE_QUANTITY_ERROR"
)

// orderResult answers a change of c: the cart, or the cart code's refusal e (about p) as its member
// of UpdateOrderItemsResult. Callers hold s.mu.
func (s *Shop) orderResult(c *cart, p *product, e *shopError) (*updateResult, error) {
	switch {
	case e == nil:
		return &updateResult{order: s.cartSnapshot(c)}, nil
	case e.code == "OUT_OF_STOCK":
		return &updateResult{refusal: &errorResult{code: insufficientStock, message: e.message,
			quantityAvailable: count32(p.Stock), order: s.cartSnapshot(c)}}, nil
	case e.code == "INVALID_QUANTITY":
		return &updateResult{refusal: &errorResult{code: orderLimit, message: e.message, maxItems: maxQuantity}}, nil
	}
	return nil, &resolverError{code: e.code, message: e.message}
}

func negativeQuantity() *updateResult {
	return &updateResult{refusal: &errorResult{code: negativeQty, message: "The quantity cannot be negative."}}
}

// updateResult resolves UpdateOrderItemsResult: the cart (Order), or a refusal.
type updateResult struct {
	order   *cartResolver
	refusal *errorResult
}

func (u *updateResult) ToOrder() (*cartResolver, bool) { return u.order, u.order != nil }

func (u *updateResult) ToInsufficientStockError() (*errorResult, bool) {
	return u.refusalOf(insufficientStock)
}

func (u *updateResult) ToOrderLimitError() (*errorResult, bool) { return u.refusalOf(orderLimit) }

func (u *updateResult) ToNegativeQuantityError() (*errorResult, bool) {
	return u.refusalOf(negativeQty)
}

func (u *updateResult) refusalOf(code string) (*errorResult, bool) {
	if u.refusal != nil && u.refusal.code == code {
		return u.refusal, true
	}
	return nil, false
}

// errorResult resolves every ErrorResult type; each reads the fields it has.
type errorResult struct {
	code              string
	message           string
	quantityAvailable int32         // InsufficientStockError
	order             *cartResolver // InsufficientStockError
	maxItems          int32         // OrderLimitError
}

func (e *errorResult) ErrorCode() string        { return e.code }
func (e *errorResult) Message() string          { return e.message }
func (e *errorResult) QuantityAvailable() int32 { return e.quantityAvailable }
func (e *errorResult) Order() *cartResolver     { return e.order }
func (e *errorResult) MaxItems() int32          { return e.maxItems }

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

// productResolver resolves Product from a snapshot.
type productResolver struct{ v productJSON }

func (p *productResolver) ID() graphql.ID { return graphql.ID(p.v.ID) }
func (p *productResolver) SKU() string    { return p.v.SKU }
func (p *productResolver) Slug() string   { return p.v.Slug }
func (p *productResolver) Name() string   { return p.v.Name }
func (p *productResolver) Price() string  { return p.v.Price }
func (p *productResolver) Stock() int32   { return count32(p.v.Stock) }

// cartResolver resolves Cart and Order from a snapshot.
type cartResolver struct {
	v     cartJSON
	lines []*lineResolver
}

// cartSnapshot is c as the resolvers answer it. Callers hold s.mu.
func (s *Shop) cartSnapshot(c *cart) *cartResolver {
	r := &cartResolver{v: s.cartView(c), lines: []*lineResolver{}}
	for _, l := range r.v.Items {
		r.lines = append(r.lines, &lineResolver{v: l, product: &productResolver{productView(s.bySKU(l.SKU))}})
	}
	return r
}

func (c *cartResolver) ID() graphql.ID         { return graphql.ID(c.v.ID) }
func (c *cartResolver) Items() []*lineResolver { return c.lines }
func (c *cartResolver) Count() int32           { return count32(c.v.Count) }
func (c *cartResolver) Total() string          { return c.v.Total }

// lineResolver resolves CartLine from a snapshot.
type lineResolver struct {
	v       lineJSON
	product *productResolver
}

func (l *lineResolver) ID() graphql.ID            { return graphql.ID(l.v.SKU) }
func (l *lineResolver) SKU() string               { return l.v.SKU }
func (l *lineResolver) Name() string              { return l.v.Name }
func (l *lineResolver) Quantity() int32           { return count32(l.v.Quantity) }
func (l *lineResolver) UnitPrice() string         { return l.v.UnitPrice }
func (l *lineResolver) LineTotal() string         { return l.v.LineTotal }
func (l *lineResolver) Product() *productResolver { return l.product }

// count32 is one of the demo shop's counts (stock, units in a cart or on one line: far below 2^31)
// as a GraphQL Int.
func count32(n int) int32 {
	return int32(n) //nolint:gosec // far below 2^31, as said above
}
