package demoshop

import (
	_ "embed"
	"html/template"
	"io"
	"net/http"
)

type homeData struct {
	Products []product
	Auctions []auctionData
}

type auctionData struct {
	ID       string
	Title    string
	Starting string
	Highest  string // "" before the first bid
	Recent   []bidView
}

type bidView struct {
	Number int
	Amount string
	At     string
}

type confirmedData struct {
	Title   string
	Message string
	Back    string // where the page's button leads
}

func auctionView(a *auction) auctionData {
	v := auctionData{ID: a.ID, Title: a.Title, Starting: formatMoney(a.StartingPrice)}
	if len(a.Bids) > 0 {
		v.Highest = formatMoney(a.highest())
	}
	for i := len(a.Bids) - 1; i >= 0 && len(v.Recent) < 10; i-- {
		b := a.Bids[i]
		v.Recent = append(v.Recent, bidView{Number: b.Number, Amount: formatMoney(b.Amount), At: b.At.Format("15:04:05")})
	}
	return v
}

const layout = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{block "title" .}}Demo Shop{{end}}</title>
<style>
  :root { --fg:#1d2125; --muted:#5f6b76; --bg:#fafaf7; --card:#fff; --line:#e3e5e8; --accent:#c2410c; --bad:#b91c1c; --good:#15803d; }
  * { box-sizing: border-box; }
  body { margin:0; background:var(--bg); color:var(--fg);
         font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; }
  header { background:#1d2125; color:#fff; padding:.9rem 1rem; display:flex; justify-content:space-between; }
  header a { color:#fff; text-decoration:none; font-weight:700; letter-spacing:.02em; }
  main { max-width:56rem; margin:0 auto; padding:1rem; }
  .grid { display:grid; gap:1rem; grid-template-columns:repeat(auto-fill,minmax(15rem,1fr)); }
  .card { background:var(--card); border:1px solid var(--line); border-radius:12px; padding:1.1rem; }
  .price { font-size:1.25rem; font-weight:700; }
  .muted { color:var(--muted); }
  button, .button { background:var(--accent); color:#fff; border:0; border-radius:8px; padding:.65rem 1.1rem;
                    font:inherit; font-weight:600; cursor:pointer; text-decoration:none; display:inline-block; }
  input { font:inherit; padding:.55rem; border:1px solid var(--line); border-radius:8px; width:8rem; }
  input[type=email] { width:16rem; }
  table { border-collapse:collapse; width:100%; } td, th { padding:.35rem .5rem; border-bottom:1px solid var(--line); text-align:left; }
  .notice { padding:.6rem .8rem; border-radius:8px; border:1px solid currentColor; }
  .notice.error { color:var(--bad); } .notice.ok { color:var(--good); }
  [hidden] { display:none !important; }
</style>
<script src="/static/shop.js" defer></script>
</head>
<body>
<header><a href="/">Demo Shop</a><a href="/cart">Cart <span data-cart-count></span></a></header>
<main>{{block "main" .}}{{end}}</main>
</body>
</html>`

var pageTemplates = map[string]string{
	"home": `{{define "main"}}
<h1>Limited drop</h1>
<div class="grid">
{{range .Products}}<div class="card">
  <h2><a href="/p/{{.Slug}}">{{.Name}}</a></h2>
  <p class="price">{{money .Price}}</p>
  <p class="muted">{{if gt .Stock 0}}{{.Stock}} left{{else}}Sold out{{end}}</p>
  <a class="button" href="/p/{{.Slug}}">View</a>
</div>
{{end}}</div>
<h1>Auctions</h1>
<div class="grid">
{{range .Auctions}}<div class="card">
  <h2><a href="/auctions/{{.ID}}">{{.Title}}</a></h2>
  <p class="price">{{if .Highest}}{{.Highest}}{{else}}from {{.Starting}}{{end}}</p>
  <p class="muted">{{if .Highest}}highest bid{{else}}no bids yet{{end}}</p>
</div>
{{end}}</div>
{{end}}`,
	"product": `{{define "title"}}{{.Name}} · Demo Shop{{end}}{{define "main"}}
<div class="card">
  <h1>{{.Name}}</h1>
  <p class="price">{{money .Price}}</p>
  <p class="muted" data-stock="{{.SKU}}">{{if gt .Stock 0}}{{.Stock}} left{{else}}Sold out{{end}}</p>
  <form class="add-to-cart" method="post" action="/cart/items">
    <input type="hidden" name="sku" value="{{.SKU}}">
    <label>Quantity <input type="number" name="quantity" value="1" min="1" max="10"></label>
    <button type="submit">Add to cart</button>
  </form>
  <p><button type="button" id="gql-add" data-product-id="{{.SKU}}" hidden>Add to cart (GraphQL)</button></p>
  <p id="notice" class="notice" role="alert" hidden></p>
  <p class="muted">SKU {{.SKU}} · also at <a href="/products/{{.ID}}">/products/{{.ID}}</a> and <a href="/p/{{.Slug}}">/p/{{.Slug}}</a></p>
</div>
{{end}}`,
	"cart": `{{define "title"}}Your cart · Demo Shop{{end}}{{define "main"}}
<div class="card">
  <h1>Your cart</h1>
  {{if .Items}}<table><tr><th>Product</th><th>Quantity</th><th>Price</th><th>Total</th></tr>
  {{range .Items}}<tr><td>{{.Name}}</td><td>{{.Quantity}}</td><td>{{.UnitPrice}}</td><td>{{.LineTotal}}</td></tr>{{end}}
  <tr><th colspan="3">Total</th><th>{{.Total}}</th></tr>
  </table>
  <form class="checkout" method="post" action="/api/carts/{{.ID}}/checkout" data-cart="{{.ID}}">
    <p><label>E-mail for the receipt (optional) <input type="email" name="email" autocomplete="email"></label></p>
    <button type="submit">Place order</button>
  </form>
  <p id="notice" class="notice" role="alert" hidden></p>
  {{else}}<p class="muted">Your cart is empty.</p><p><a class="button" href="/">Shop</a></p>{{end}}
</div>
{{end}}`,
	"order": `{{define "title"}}Order #{{.Number}} · Demo Shop{{end}}{{define "main"}}
<div class="card">
  <h1>Order #{{.Number}} confirmed</h1>
  <table><tr><th>Product</th><th>Quantity</th><th>Total</th></tr>
  {{range .Items}}<tr><td>{{.Name}}</td><td>{{.Quantity}}</td><td>{{.LineTotal}}</td></tr>{{end}}
  <tr><th colspan="2">Total</th><th>{{.Total}}</th></tr>
  </table>
  {{if .Email}}<p class="muted">A receipt goes to {{.Email}}.</p>{{end}}
  <p><a class="button" href="/">Back to the shop</a></p>
</div>
{{end}}`,
	"auction": `{{define "title"}}{{.Title}} · Demo Shop{{end}}{{define "main"}}
<div class="card">
  <h1>{{.Title}}</h1>
  {{if .Highest}}<p class="price">Highest bid: {{.Highest}}</p>{{else}}<p class="price">No bids yet — starting price {{.Starting}}</p>{{end}}
  <form method="post" action="/auctions/{{.ID}}/bid">
    <label>Your bid <input type="text" name="amount" inputmode="decimal" placeholder="{{.Starting}}" required></label>
    <button type="submit">Place bid</button>
  </form>
  {{if .Recent}}<h2>Recent bids</h2>
  <table><tr><th>#</th><th>Amount</th><th>Time</th></tr>
  {{range .Recent}}<tr><td>{{.Number}}</td><td>{{.Amount}}</td><td>{{.At}}</td></tr>{{end}}
  </table>{{end}}
</div>
{{end}}`,
	"confirmed": `{{define "title"}}{{.Title}} · Demo Shop{{end}}{{define "main"}}
<div class="card"><h1>{{.Title}}</h1><p>{{.Message}}</p><p><a class="button" href="{{.Back}}">Back</a></p></div>
{{end}}`,
	"problem": `{{define "title"}}{{.Title}} · Demo Shop{{end}}{{define "main"}}
<div class="card"><h1>{{.Title}}</h1><p>{{.Message}}</p><p><a class="button" href="{{.Back}}">Back to the shop</a></p></div>
{{end}}`,
	"orders": `{{define "title"}}Orders · Demo Shop{{end}}{{define "main"}}
<h1>Orders</h1>
{{if .}}<table><tr><th>Order</th><th>Items</th><th>Total</th></tr>
{{range .}}<tr><td><a href="/orders/{{.Number}}">#{{.Number}}</a></td><td>{{range $i, $l := .Items}}{{if $i}}, {{end}}{{$l.Quantity}} × {{$l.Name}}{{end}}</td><td>{{.Total}}</td></tr>{{end}}
</table>{{else}}<p class="muted">No orders yet.</p>{{end}}
{{end}}`,
}

// pages holds one parsed template per page, each with the layout.
type pages struct{ byName map[string]*template.Template }

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	funcs := template.FuncMap{"money": formatMoney}
	for name, text := range pageTemplates {
		t, err := template.New("layout").Funcs(funcs).Parse(layout)
		if err != nil {
			return nil, err
		}
		if _, err := t.Parse(text); err != nil {
			return nil, err
		}
		p.byName[name] = t
	}
	return p, nil
}

func (p *pages) render(w io.Writer, name string, data any) error {
	return p.byName[name].ExecuteTemplate(w, "layout", data)
}

//go:embed shop.js
var script []byte

// serveScript serves the shop's page script.
func serveScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(script)
}
