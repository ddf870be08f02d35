// The demo shop's page script, as a shop's front-end would have one: it adds to the cart and checks out
// through the cart API (JSON), reads the cart and stock through /api/graphql, and shows a failed call's
// error.message — the shape of this shop's API errors, {"error": {"code": "...", "message": "..."}} —
// or its own fallback text when a failed answer has none. The product page's "Add to cart (GraphQL)"
// button (#gql-add) adds through the addItemToOrder mutation instead, and shows in the same notice
// the refusal's message: a member of the mutation's result union, or errors[0].message of an answer
// with errors (the shop's, or a refusal by what runs in front of it, whatever its status).
(function () {
  'use strict';

  function cookie(name) {
    const m = document.cookie.match(new RegExp('(?:^|; )' + name + '=([^;]*)'));
    return m ? decodeURIComponent(m[1]) : '';
  }

  function notice(text, ok) {
    const box = document.getElementById('notice');
    if (!box) return;
    box.textContent = text;
    box.className = 'notice ' + (ok ? 'ok' : 'error');
    box.hidden = false;
  }

  // call sends JSON and returns the answer's JSON; a failed answer throws its error.message, or fallback.
  async function call(method, url, body, fallback) {
    const resp = await fetch(url, {
      method, credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await resp.json(); } catch (e) { /* not JSON */ }
    if (!resp.ok) {
      const err = new Error((data && data.error && data.error.message) || fallback);
      err.code = data && data.error && data.error.code;
      throw err;
    }
    return data;
  }

  // graphql sends one GraphQL request and returns its data; an answer with errors throws
  // errors[0].message, a failed one without them its error.message, or fallback.
  async function graphql(text, variables, fallback) {
    const resp = await fetch('/api/graphql', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ query: text, variables }),
    });
    let answer = null;
    try { answer = await resp.json(); } catch (e) { /* not JSON */ }
    const first = answer && Array.isArray(answer.errors) && answer.errors[0];
    if (first) {
      const err = new Error(first.message || fallback);
      err.code = first.extensions && first.extensions.code;
      throw err;
    }
    if (!resp.ok || !answer || !answer.data) throw new Error((answer && answer.error && answer.error.message) || fallback);
    return answer.data;
  }

  function query(text, variables) {
    return graphql(text, variables, 'The shop cannot be read.');
  }

  async function cartId() {
    const id = cookie('cart');
    if (id) return id;
    const created = await call('POST', '/api/carts', undefined, 'Your cart could not be created.');
    return created.cart.id;
  }

  function showCount(count) {
    for (const el of document.querySelectorAll('[data-cart-count]')) el.textContent = count ? '(' + count + ')' : '';
  }

  async function refresh() {
    const stock = document.querySelector('[data-stock]');
    const data = await query('query Refresh($cart: ID!, $sku: String!) { cart(id: $cart) { count } product(sku: $sku) { stock } }',
      { cart: cookie('cart'), sku: stock ? stock.dataset.stock : '' });
    showCount(data.cart ? data.cart.count : 0);
    if (stock && data.product) stock.textContent = data.product.stock > 0 ? data.product.stock + ' left' : 'Sold out';
  }

  async function addToCart(form) {
    const item = { sku: form.elements.sku.value, quantity: Number(form.elements.quantity.value) };
    const fallback = 'Failed to add item.';
    let id = await cartId();
    let answer;
    try {
      answer = await call('POST', '/api/carts/' + encodeURIComponent(id) + '/items', item, fallback);
    } catch (e) {
      if (e.code !== 'CART_NOT_FOUND') throw e;
      document.cookie = 'cart=; Path=/; Max-Age=0'; // the shop forgot the cart: start a new one
      id = await cartId();
      answer = await call('POST', '/api/carts/' + encodeURIComponent(id) + '/items', item, fallback);
    }
    showCount(answer.cart.count);
    notice(added(answer.cart.count), true);
  }

  // added is the notice once the cart holds n items.
  function added(n) {
    return 'Added to your cart (' + n + (n === 1 ? ' item).' : ' items).');
  }

  const addItemToOrder = 'mutation AddItem($productVariantId: ID!, $quantity: Int!) {' +
    ' addItemToOrder(productVariantId: $productVariantId, quantity: $quantity) {' +
    ' __typename ... on Order { count } ... on ErrorResult { errorCode message } } }';

  // addThroughGraphQL adds the product of the #gql-add button, in the quantity of the page's form.
  async function addThroughGraphQL(button) {
    const fallback = 'Failed to add item.';
    const form = document.querySelector('form.add-to-cart');
    const quantity = Number(form ? form.elements.quantity.value : 1);
    if (!Number.isInteger(quantity)) throw new Error('Choose a whole number of items.');
    const data = await graphql(addItemToOrder, { productVariantId: button.dataset.productId, quantity }, fallback);
    const result = data.addItemToOrder;
    if (!result || result.__typename !== 'Order') throw new Error((result && result.message) || fallback);
    showCount(result.count);
    notice(added(result.count), true);
  }

  async function checkout(form) {
    const email = form.elements.email.value.trim();
    const answer = await call('POST', '/api/carts/' + encodeURIComponent(form.dataset.cart) + '/checkout',
      email ? { email } : {}, 'Your order could not be placed.');
    location.assign('/orders/' + answer.order.number);
  }

  document.addEventListener('submit', (ev) => {
    const form = ev.target;
    const action = form.classList.contains('add-to-cart') ? addToCart : form.classList.contains('checkout') ? checkout : null;
    if (!action) return;
    ev.preventDefault();
    const button = form.querySelector('button');
    button.disabled = true;
    action(form).catch((e) => notice(e.message, false)).finally(() => { button.disabled = false; refresh().catch(() => {}); });
  });

  const gqlAdd = document.getElementById('gql-add');
  if (gqlAdd) {
    gqlAdd.hidden = false; // it needs this script
    gqlAdd.addEventListener('click', () => {
      gqlAdd.disabled = true;
      addThroughGraphQL(gqlAdd).catch((e) => notice(e.message, false))
        .finally(() => { gqlAdd.disabled = false; refresh().catch(() => {}); });
    });
  }

  refresh().catch(() => {});
})();
