// The demo shop's own pages and scripts through edgeq: adding to the cart (through its JSON API and its
// GraphQL endpoint), bidding, buying once per person, and the whole visit over TLS.
import { base, chromiumSwitches, env, expect, log, screenshot } from './lib.mjs';
import { browser, complete, desktop, text } from './common.mjs';

// shop: the shop's own page script through edgeq. A product page under its second URL (served at once
// on the sale queue), add to cart through the one add-to-cart URL (JSON, the SKU in the body), reads
// through the shop's /api/graphql (never gated), a refusal by edgeq that the script shows, and the
// checkout, which takes only the cart id.
export async function shop() {
  const b = await browser(desktop);
  const { page } = b;
  const graphql = [];
  page.on('response', (r) => { if (r.url().endsWith('/api/graphql')) graphql.push(r.status()); });
  try {
    await page.goto(base + '/');
    await Promise.all([page.waitForURL(base + '/p/team-jersey'), page.click('a:text("Team jersey")')]);
    expect((await text(page, 'h1')) === 'Team jersey', 'not the product page: ' + page.url());

    // The add-to-cart answer is the shop's; the badge comes from the shop's GraphQL read.
    const added = async () => {
      const [resp] = await Promise.all([page.waitForResponse((r) => /\/api\/carts\/[0-9a-f]+\/items$/.test(r.url())),
        page.click('form.add-to-cart button')]);
      await page.waitForFunction(() => !document.getElementById('notice').hidden);
      return { status: resp.status(), body: await resp.json(), notice: await text(page, '#notice'), cls: await page.getAttribute('#notice', 'class') };
    };
    let r = await added(); // a SKU edgeq guards: admitted
    expect(r.status === 200 && r.cls === 'notice ok' && r.notice.startsWith('Added to your cart'), 'jersey: ' + JSON.stringify(r));
    await page.waitForFunction(() => document.querySelector('[data-cart-count]').textContent === '(1)');
    const guarded = await (await fetch(base + '/_edgeq/products/jersey')).json();
    expect(guarded.remaining_stock === 299, 'edgeq\'s jersey stock: ' + JSON.stringify(guarded));

    // edgeq has no stock of sneaker-b: it refuses, in the shop's own error shape (the route's
    // refusal.json), so the shop's script shows edgeq's message instead of its fallback.
    await page.goto(base + '/p/limited-sneaker-b');
    r = await added();
    expect(r.status === 409 && r.body.error && r.body.error.code === 'INSUFFICIENT_STOCK', 'sneaker-b: ' + JSON.stringify(r));
    expect(r.cls === 'notice error' && r.notice === 'Sorry, this item is sold out.', 'the shop\'s script showed: ' + JSON.stringify(r));
    log('refused by edgeq, the shop\'s script shows:', r.notice);

    // A SKU edgeq does not guard passes (unknown_product: pass).
    await page.goto(base + '/p/limited-sneaker-a');
    r = await added();
    expect(r.status === 200 && r.body.cart.count === 2, 'sneaker-a: ' + JSON.stringify(r));

    await page.goto(base + '/cart');
    const rows = await text(page, 'table');
    expect(rows.includes('Team jersey') && rows.includes('Limited sneaker A') && !rows.includes('Limited sneaker B'), 'cart: ' + rows);
    await page.fill('input[name=email]', 'guest@example.com');
    await Promise.all([page.waitForURL(/\/orders\/\d+$/), page.click('form.checkout button')]);
    const heading = await text(page, 'h1');
    expect(/^Order #\d+ confirmed$/.test(heading), 'after the checkout: ' + heading);
    log(heading, page.url());

    const office = await (await fetch(base + '/orders.json')).json();
    const order = office.orders.find((o) => o.email === 'guest@example.com');
    expect(order && order.items.map((i) => i.sku).join(',') === 'jersey,sneaker-a', 'the shop\'s order: ' + JSON.stringify(order));
    expect(graphql.length >= 4 && graphql.every((st) => st === 200), 'graphql reads: ' + graphql);
    expect(b.dialogs.length === 0 && b.consoleErrors.length === 0, 'dialogs/errors: ' + b.dialogs + b.consoleErrors);
  } finally {
    await b.close();
  }
}

// graphqlShop: the shop's page adds through its GraphQL endpoint (addItemToOrder), which edgeq guards
// with a graphql: route: a guarded SKU is admitted (edgeq's stock goes down), a SKU edgeq has none of
// is refused with a GraphQL-shaped answer whose message the shop's script shows, and every other
// GraphQL call of the page (the cart badge, the stock) passes untouched.
export async function graphqlShop() {
  const b = await browser(desktop);
  const { page } = b;
  const reads = [];
  const mutations = [];
  page.on('request', (req) => {
    if (!req.url().includes('/api/graphql')) return;
    const body = req.postData() || '';
    (body.includes('addItemToOrder') ? mutations : reads).push(req);
  });
  const readStatuses = async () => Promise.all(reads.map(async (req) => { const r = await req.response(); return r ? r.status() : 0; }));
  try {
    const before = await (await fetch(base + '/_edgeq/products/jersey')).json();
    await page.goto(base + '/p/team-jersey');
    expect((await text(page, 'h1')) === 'Team jersey', 'not the product page: ' + page.url());
    await page.waitForSelector('#gql-add:not([hidden])');
    const add = async () => {
      const [resp] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith('/api/graphql') && (r.request().postData() || '').includes('addItemToOrder')),
        page.click('#gql-add')]);
      await page.waitForFunction(() => !document.getElementById('notice').hidden);
      return { status: resp.status(), body: await resp.json(), notice: await text(page, '#notice'), cls: await page.getAttribute('#notice', 'class') };
    };
    let r = await add(); // a SKU edgeq guards: admitted, added by the shop's GraphQL executor
    expect(r.status === 200 && r.body.data.addItemToOrder.__typename === 'Order' && r.cls === 'notice ok', 'jersey: ' + JSON.stringify(r));
    await page.waitForFunction(() => document.querySelector('[data-cart-count]').textContent === '(1)');
    const after = await (await fetch(base + '/_edgeq/products/jersey')).json();
    expect(after.remaining_stock === before.remaining_stock - 1, 'edgeq\'s jersey stock: ' + JSON.stringify([before, after]));
    log('added through GraphQL; edgeq\'s jersey stock', before.remaining_stock, '->', after.remaining_stock);

    // edgeq has no sneaker-b: refused before the shop, in GraphQL's shape; the script shows its message.
    await page.goto(base + '/p/limited-sneaker-b');
    await page.waitForSelector('#gql-add:not([hidden])');
    r = await add();
    const err = r.body.errors && r.body.errors[0];
    expect(r.status === 409 && r.body.data === null && err && err.extensions.code === 'INSUFFICIENT_STOCK', 'sneaker-b: ' + JSON.stringify(r));
    expect(r.cls === 'notice error' && r.notice === 'Sorry, this item is sold out.', 'the shop\'s script showed: ' + JSON.stringify(r));
    log('refused by edgeq, the shop\'s script shows:', r.notice);

    // The page's own GraphQL reads keep working while the mutation is guarded: the badge is the cart's.
    await page.reload();
    await page.waitForFunction(() => document.querySelector('[data-cart-count]').textContent === '(1)');
    const statuses = await readStatuses();
    expect(reads.length >= 3 && statuses.every((st) => st === 200), 'GraphQL reads: ' + statuses);
    expect(mutations.length === 2, 'mutations sent: ' + mutations.length);

    // Check out (complete_on frees the place for the other scenarios of the sale queue).
    await page.goto(base + '/cart');
    await page.fill('input[name=email]', 'graphql@example.com');
    await Promise.all([page.waitForURL(/\/orders\/\d+$/), page.click('form.checkout button')]);
    expect(b.dialogs.length === 0 && b.consoleErrors.length === 0, 'dialogs/errors: ' + b.dialogs + b.consoleErrors);
  } finally {
    await b.close();
  }
}

// bid: the shop's own bid form through edgeq. An accepted bid reaches the shop, which confirms it; a
// bid that does not beat it is refused by edgeq with its page (409, in the visitor's language), and
// the highest-bid read edgeq serves shows the accepted bid.
export async function bid() {
  const b = await browser(desktop);
  const { page } = b;
  try {
    await page.goto(base + '/auctions/7');
    expect((await text(page, 'h1')) === 'Vintage racing poster', 'not the auction page: ' + page.url());
    await page.fill('input[name=amount]', '25.00');
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    expect((await text(page, 'h1')).includes('25.00 received'), 'the shop did not confirm: ' + await text(page, 'body'));

    await page.goto(base + '/auctions/7');
    await page.fill('input[name=amount]', '25.50');
    const [resp] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    expect(resp.status() === 409, 'a low bid answered ' + resp.status());
    const body = await text(page, 'body');
    expect(body.includes('Bid too low') && body.includes('bid higher') && body.includes('The highest bid is now 25.00.'), 'not edgeq\'s refusal page: ' + body);
    const back = await page.getAttribute('a.button', 'href');
    expect(back === '/auctions/7', 'the button leads to ' + back);
    await screenshot(page, 'bid-too-low');

    const highest = await (await fetch(base + '/_edgeq/auctions/7/highest-bid')).json();
    expect(highest.highest_bid && highest.highest_bid.amount === '25.00', 'highest bid: ' + JSON.stringify(highest));
    const shop = await (await fetch(base + '/orders.json')).json();
    const amounts = shop.bids.filter((x) => x.auction === '7').map((x) => x.amount);
    expect(amounts.length === 1 && amounts[0] === '25.00', 'bids the shop received: ' + JSON.stringify(amounts));
  } finally {
    await b.close();
  }
}

// onePerBrowser: one browser buys the one-per-person jersey (per_user_limit 1) through the shop's own
// page, places the order (the checkout completes its visit), joins the queue again for a new place and
// tries again. On the host whose add-to-cart counts buyers by visitor id (user: visitor) the second try
// is refused ALREADY_PURCHASED before the shop, and the shop's script shows edgeq's message; on the
// host that counts places in line (user: token) the new place buys a second jersey: the trade-off
// docs/shops.md describes. The visitor id is a cookie the page's script cannot read, the same across
// places.
export async function onePerBrowser() {
  const port = new URL(base).port;
  const stock = async () => (await (await fetch(base + '/_edgeq/products/jersey')).json()).remaining_stock;
  const b = await browser(desktop);
  const { page } = b;
  const context = page.context();
  // The request id of the browser's current place: the subject of its token cookie.
  const placeOf = async (site) => {
    const c = (await context.cookies(site)).find((ck) => ck.name === 'edgeq_tk_once');
    return c ? JSON.parse(Buffer.from(c.value.split('.')[1], 'base64url').toString()).sub : '';
  };
  const visitorCookie = async (site) => (await context.cookies(site)).find((ck) => ck.name === 'edgeq_vid');
  // A place other than last (the last one's visit ended with its order, which may take a moment to
  // reach the gate), then the jersey added with the product page's own button.
  const tryToBuy = async (site, last) => {
    let place = '';
    for (let i = 0; i < 40 && (!place || place === last); i++) {
      if (i > 0) await page.waitForTimeout(250);
      await page.goto(site + '/p/team-jersey');
      await page.waitForURL(site + '/p/team-jersey', { timeout: 15000 });
      place = await placeOf(site);
    }
    expect(place && place !== last, `${site}: no new place after the order (still ${place})`);
    await page.waitForSelector('#gql-add:not([hidden])'); // the shop's script is running: it adds through its API
    const [resp] = await Promise.all([page.waitForResponse((r) => /\/api\/carts\/[0-9a-f]+\/items$/.test(r.url())),
      page.click('form.add-to-cart button')]);
    await page.waitForFunction(() => !document.getElementById('notice').hidden);
    return { place, status: resp.status(), body: await resp.json(), notice: await text(page, '#notice') };
  };
  const checkOut = async (site, email) => {
    await page.goto(site + '/cart');
    await page.fill('input[name=email]', email);
    await Promise.all([page.waitForURL(/\/orders\/\d+$/), page.click('form.checkout button')]);
  };
  try {
    // user: visitor
    const site = `http://visitor.localhost:${port}`;
    const before = await stock();
    const first = await tryToBuy(site, '');
    expect(first.status === 200 && first.notice.startsWith('Added to your cart'), 'visitor, first jersey: ' + JSON.stringify(first));
    const vid = await visitorCookie(site);
    expect(vid && vid.httpOnly && vid.sameSite === 'Lax' && vid.path === '/' && vid.expires > Date.now() / 1000 + 300 * 86400,
      'the visitor id cookie: ' + JSON.stringify(vid));
    expect(!(await page.evaluate(() => document.cookie)).includes('edgeq_'), 'the page\'s script reads an edgeq cookie');
    expect((await context.cookies(site)).some((ck) => ck.name === 'cart'), 'the shop\'s cart cookie is gone');
    await checkOut(site, 'visitor@example.com');
    const second = await tryToBuy(site, first.place);
    expect(second.status === 409 && second.body.error && second.body.error.code === 'ALREADY_PURCHASED', 'visitor, again: ' + JSON.stringify(second));
    expect(second.notice === 'You have already bought as many of this item as one person may.', 'the shop\'s script showed: ' + second.notice);
    expect((await visitorCookie(site)).value === vid.value, 'the visitor id changed with the place');
    expect(await stock() === before - 1, `visitor: edgeq's jersey stock ${before} -> ${await stock()}, want one sold`);
    log('user: visitor, places', first.place, 'and', second.place, '->', second.body.error.code);

    // user: token, the same browser on the other host: the new place is a new buyer.
    const other = `http://token.localhost:${port}`;
    const one = await tryToBuy(other, '');
    expect(one.status === 200, 'token, first jersey: ' + JSON.stringify(one));
    await checkOut(other, 'token@example.com');
    const two = await tryToBuy(other, one.place);
    expect(two.status === 200 && two.notice.startsWith('Added to your cart'), 'token, again: ' + JSON.stringify(two));
    expect(await stock() === before - 3, `token: edgeq's jersey stock ${before} -> ${await stock()}, want three sold in all`);
    log('user: token, places', one.place, 'and', two.place, '-> bought twice');
    expect(b.dialogs.length === 0 && b.consoleErrors.length === 0, 'dialogs/errors: ' + b.dialogs + b.consoleErrors);
  } finally {
    await b.close();
  }
}

// overTLS: edgeq alone at the edge. Chromium trusts the test's certificate by its key hash (a
// certificate check that still runs, not one turned off) and reaches the TLS listener over HTTP/2:
// the waiting page and its polls, the way in once the slot frees, a jersey added through the shop's
// own script (stock admission) and the order placed. edgeq's cookies are Secure and its answers
// carry HSTS.
export async function overTLS() {
  const tls = env.EDGEQ_TLS_URL;
  const b = await browser({ ...desktop, args: [...chromiumSwitches, '--ignore-certificate-errors-spki-list=' + env.SPKI] });
  const { page } = b;
  const protocolOf = (kind, part) => page.evaluate(([k, p]) => performance.getEntriesByType(k)
    .filter((e) => e.name.includes(p)).map((e) => e.nextHopProtocol), [kind, part]);
  const stock = async () => (await (await fetch(base + '/_edgeq/products/jersey')).json()).remaining_stock;
  try {
    const resp = await page.goto(tls + '/p/team-jersey');
    expect(page.url().startsWith(tls + '/_edgeq/wait/door?return=%2Fp%2Fteam-jersey'), 'not on the waiting page: ' + page.url());
    expect((await protocolOf('navigation', '')).join() === 'h2', 'the waiting page came over ' + await protocolOf('navigation', ''));
    expect(resp.headers()['strict-transport-security'] === 'max-age=300', 'HSTS: ' + JSON.stringify(resp.headers()));
    await page.waitForFunction(() => document.documentElement.classList.contains('js'));
    expect(/^\d+$/.test(await text(page, '#position')), 'no position: ' + await text(page, '#position'));
    await page.waitForResponse((r) => r.url().includes('/_edgeq/status/door/'), { timeout: 15000 });
    const polls = await protocolOf('resource', '/_edgeq/status/door/');
    expect(polls.length > 0 && polls.every((p) => p === 'h2'), 'the polls came over ' + polls);
    log('waiting over', (await protocolOf('navigation', '')).join(), 'at', await text(page, '#position'), 'polls', polls.join());

    const before = await stock();
    await complete('door', env.HOLDER);
    await page.waitForURL(tls + '/p/team-jersey', { timeout: 30000 });
    expect((await text(page, 'h1')) === 'Team jersey', 'landed on: ' + await text(page, 'h1'));
    expect((await protocolOf('navigation', '')).join() === 'h2', 'the shop page came over ' + await protocolOf('navigation', ''));
    const cookies = (await page.context().cookies(tls)).filter((c) => c.name.startsWith('edgeq_'));
    expect(cookies.length > 0 && cookies.every((c) => c.secure), 'edgeq cookies over TLS: ' + JSON.stringify(cookies));

    await page.waitForSelector('#gql-add:not([hidden])'); // the shop's script is running: it adds through its API
    const [added] = await Promise.all([page.waitForResponse((r) => /\/api\/carts\/[0-9a-f]+\/items$/.test(r.url())),
      page.click('form.add-to-cart button')]);
    expect(added.status() === 200, 'add to cart: ' + added.status() + ' ' + await added.text());
    const adds = await protocolOf('resource', '/items');
    expect(adds.length > 0 && adds.every((p) => p === 'h2'), 'the add-to-cart call came over ' + adds);
    expect(await stock() === before - 1, `edgeq's jersey stock ${before} -> ${await stock()}, want one sold`);

    await page.goto(tls + '/cart');
    await page.fill('input[name=email]', 'tls@example.com');
    await Promise.all([page.waitForURL(/\/orders\/\d+$/), page.click('form.checkout button')]);
    const heading = await text(page, 'h1');
    expect(/^Order #\d+ confirmed$/.test(heading), 'after the checkout: ' + heading);
    expect(b.dialogs.length === 0 && b.consoleErrors.length === 0, 'dialogs/errors: ' + b.dialogs + b.consoleErrors);
    log(heading, 'over', (await protocolOf('navigation', '')).join());
  } finally {
    await b.close();
  }
}
