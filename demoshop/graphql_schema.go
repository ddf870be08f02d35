package demoshop

import graphql "github.com/graph-gophers/graphql-go"

// GraphQLSchema is the schema of /api/graphql, modelled on Vendure's shop API.
const GraphQLSchema = `
schema {
	query: Query
	mutation: Mutation
}

type Query {
	"Every product, in catalogue order."
	products: [Product!]!
	"The product with any of the keys given; null when none is given or none matches."
	product(id: ID, sku: String, slug: String): Product
	"The cart with this id; null when there is none."
	cart(id: ID): Cart
	"The cart of the visitor's cart cookie; null without one."
	activeOrder: Cart
}

type Mutation {
	"""
	Adds quantity units of a product variant to the cart of the cart cookie, creating the cart and setting
	the cookie when there is none. The shop has one variant per product; its id is the product's SKU (the
	id the REST cart API names too, so a gateway guards both under one id).
	"""
	addItemToOrder(productVariantId: ID!, quantity: Int!): UpdateOrderItemsResult!
	"""
	Sets the quantity of a line of the cart of the cart cookie; 0 removes the line. A line's id is the
	SKU of its product variant.
	"""
	adjustOrderLine(orderLineId: ID!, quantity: Int!): UpdateOrderItemsResult!
}

type Product {
	id: ID!
	sku: String!
	slug: String!
	name: String!
	"The unit price, a decimal such as 99.99."
	price: String!
	"Units in stock."
	stock: Int!
}

"A cart."
type Cart {
	id: ID!
	items: [CartLine!]!
	"Units in the cart."
	count: Int!
	total: String!
}

"A cart as the cart mutations answer it (Vendure's active order): the fields of Cart."
type Order {
	id: ID!
	items: [CartLine!]!
	count: Int!
	total: String!
}

"One product in a cart."
type CartLine {
	"The line's id: its product's id."
	id: ID!
	sku: String!
	name: String!
	quantity: Int!
	unitPrice: String!
	lineTotal: String!
	product: Product!
}

union UpdateOrderItemsResult = Order | InsufficientStockError | OrderLimitError | NegativeQuantityError

enum ErrorCode {
	INSUFFICIENT_STOCK_ERROR
	ORDER_LIMIT_ERROR
	NEGATIVE_QUANTITY_ERROR
}

"A refusal of a cart mutation; message is for the shopper."
interface ErrorResult {
	errorCode: ErrorCode!
	message: String!
}

"The shop has fewer units than the line would hold; nothing was changed."
type InsufficientStockError implements ErrorResult {
	errorCode: ErrorCode!
	message: String!
	"Units in stock: the most the line may hold."
	quantityAvailable: Int!
	order: Order!
}

"A quantity outside 1 to maxItems units of one product per order."
type OrderLimitError implements ErrorResult {
	errorCode: ErrorCode!
	message: String!
	maxItems: Int!
}

"A negative quantity."
type NegativeQuantityError implements ErrorResult {
	errorCode: ErrorCode!
	message: String!
}
`

// graphqlSchema executes GraphQLSchema; the resolvers find the shop and the visitor in the context.
var graphqlSchema = graphql.MustParseSchema(GraphQLSchema, &gqlRoot{}, graphql.UseStringDescriptions())
