// Browser scenarios of edgeq's pages, in headless Chromium through playwright-core. The Go test
// e2e_test.go starts the demo shop, edgeq and the Turnstile stand-in, then runs
//
//   node browser.mjs <scenario>
//
// with the addresses in the environment. A scenario throws (exit 1) on the first broken expectation.
import { chromium } from 'playwright-core';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = process.env;
const base = env.EDGEQ_URL;
const executablePath = env.CHROMIUM || '/usr/bin/chromium';
// The flags the project runs Chromium with: no network of its own, no first-run noise.
const flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];

const desktop = { viewport: { width: 1280, height: 800 } };
const phone = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true };

function expect(ok, message) {
  if (!ok) throw new Error(message);
}

function log(...args) {
  console.log('[e2e]', ...args);
}

// browser opens a fresh Chromium with its own new --user-data-dir.
async function browser(options = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'edgeq-chromium-'));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath, headless: true, args: flags, locale: 'en-US', ...options,
  });
  const page = context.pages()[0] || await context.newPage();
  const dialogs = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  const consoleErrors = [];
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  return {
    page, dialogs, consoleErrors,
    async close() { await context.close(); rmSync(dir, { recursive: true, force: true }); },
  };
}

async function text(page, selector) {
  return ((await page.textContent(selector)) || '').trim();
}

async function complete(queue, requestID) {
  const resp = await fetch(env.EDGEQ_ADMIN_URL + '/api/queue/update_token_status', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + env.EDGEQ_ADMIN_KEY, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ queue_id: queue, request_id: requestID, status: '1' }),
  });
  expect(resp.ok, `completing ${requestID} of ${queue}: ${resp.status} ${await resp.text()}`);
}

async function screenshot(page, name) {
  if (!env.SCREENSHOT_DIR) return;
  mkdirSync(env.SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(env.SCREENSHOT_DIR, name + '.png'), fullPage: true });
  log('screenshot', name);
}

// waitroom: a gated product page while another visitor holds the only slot. The waiting page shows
// the position and an estimated wait, keeps the position across a reload, and lands on the shop page
// by itself once the slot frees.
async function waitroom() {
  const b = await browser(desktop);
  const { page } = b;
  try {
    await page.goto(base + '/products/2');
    expect(page.url().startsWith(base + '/_edgeq/wait/drop?return=%2Fproducts%2F2'), 'not on the waiting page: ' + page.url());
    await page.waitForFunction(() => document.documentElement.classList.contains('js'));
    const position = await text(page, '#position');
    const eta = await text(page, '#eta');
    log('position', position, 'ahead', await text(page, '#ahead'), 'eta', eta);
    expect(/^\d+$/.test(position), 'no position: ' + position);
    expect(eta !== '' && eta !== 'Calculating…', 'no estimated wait: ' + eta);
    expect(await page.getAttribute('#announce', 'aria-live') === 'polite', 'updates are not announced');

    await page.reload();
    expect(await text(page, '#position') === position, 'the reload changed the position');

    await complete('drop', env.HOLDER);
    await page.waitForURL(base + '/products/2', { timeout: 30000 });
    const heading = await text(page, 'h1');
    expect(heading === 'Limited sneaker B', 'landed on: ' + heading);
    expect(b.dialogs.length === 0 && b.consoleErrors.length === 0, 'dialogs/errors: ' + b.dialogs + b.consoleErrors);
    log('landed on', page.url());
  } finally {
    await b.close();
  }
}

// nojs: the same with JavaScript off: the page refreshes itself and the server sends the visitor on.
async function nojs() {
  const b = await browser({ ...desktop, javaScriptEnabled: false });
  const { page } = b;
  try {
    await page.goto(base + '/orders');
    expect(page.url().startsWith(base + '/_edgeq/wait/quiet'), 'not on the waiting page: ' + page.url());
    const position = await text(page, '#position');
    expect(/^\d+$/.test(position), 'no server-rendered position: ' + position);
    log('position', position);
    expect((await page.content()).includes('http-equiv="refresh"'), 'no meta refresh');
    await complete('quiet', env.HOLDER);
    await page.waitForURL(base + '/orders', { timeout: 30000 });
    expect((await text(page, 'h1')) === 'Orders', 'landed on: ' + await text(page, 'h1'));
    log('landed on', page.url());

    // The product form without JavaScript posts to /cart/items. edgeq has no stock of sneaker-b (the
    // stack's products: stock 0): its sold-out page, in place of the shop's answer.
    await page.goto(base + '/p/limited-sneaker-b');
    expect((await text(page, 'h1')) === 'Limited sneaker B', 'not the product page: ' + page.url());
    let [resp] = await Promise.all([page.waitForNavigation(), page.click('form.add-to-cart button')]);
    let body = await text(page, 'body');
    expect(resp.status() === 409 && body.includes('Sold out') && body.includes('INSUFFICIENT_STOCK'), 'not edgeq\'s sold-out page: ' + resp.status() + ' ' + body);
    log('sold out:', resp.status(), await text(page, 'h1'));
    // A product edgeq does not guard passes (unknown_product: pass) into the shop's cart.
    await page.goto(base + '/p/limited-sneaker-a');
    [resp] = await Promise.all([page.waitForNavigation(), page.click('form.add-to-cart button')]);
    expect(page.url() === base + '/cart' && (await text(page, 'table')).includes('Limited sneaker A'), 'not in the cart: ' + page.url() + ' ' + await text(page, 'body'));
    log('added without JavaScript:', page.url());
  } finally {
    await b.close();
  }
}

// turnstile: a queue that asks for Turnstile shows the widget; ticking it and joining gives a place,
// and the visitor lands on the shop page when the slot frees.
async function turnstile() {
  const b = await browser(desktop);
  const { page } = b;
  try {
    await page.goto(base + '/auctions/42');
    expect(page.url().startsWith(base + '/_edgeq/wait/club'), 'not on the waiting page: ' + page.url());
    await page.waitForSelector('[data-testid=turnstile-checkbox]');
    await page.check('[data-testid=turnstile-checkbox]');
    await page.waitForFunction(() => {
      const input = document.querySelector('input[name=cf-turnstile-response]');
      return input && input.value.length > 0;
    });
    await screenshot(page, 'turnstile-join-desktop-en');
    await Promise.all([page.waitForURL(/\/_edgeq\/wait\/club/), page.click('button[type=submit]')]);
    await page.waitForSelector('#position');
    log('joined at position', await text(page, '#position'));
    await complete('club', env.HOLDER);
    await page.waitForURL(base + '/auctions/42', { timeout: 30000 });
    expect((await text(page, 'h1')) === 'Signed match ball', 'landed on: ' + await text(page, 'h1'));
    log('landed on', page.url());
  } finally {
    await b.close();
  }
}

// screenshots: the waiting page at desktop and phone width, in English and Traditional Chinese.
async function screenshots() {
  for (const [device, options] of [['desktop', desktop], ['phone', phone]]) {
    for (const locale of ['en', 'zh-TW']) {
      const b = await browser({ ...options, locale });
      try {
        await b.page.goto(base + '/_edgeq/wait/shots?return=%2Fproducts%2F1');
        await b.page.waitForFunction(() => document.documentElement.classList.contains('js'));
        expect(await b.page.getAttribute('html', 'lang') === locale, 'page language ' + await b.page.getAttribute('html', 'lang'));
        if (locale === 'zh-TW') expect((await text(b.page, '.status')) === '等候室', 'not in Traditional Chinese');
        await b.page.waitForTimeout(300); // let the first poll settle the numbers
        await screenshot(b.page, `wait-${device}-${locale}`);
      } finally {
        await b.close();
      }
    }
  }
}

// shop: the shop's own page script through edgeq. A product page under its second URL (served at once
// on the sale queue), add to cart through the one add-to-cart URL (JSON, the SKU in the body), reads
// through the shop's /api/graphql (never gated), a refusal by edgeq that the script shows, and the
// checkout, which takes only the cart id.
async function shop() {
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

// bid: the shop's own bid form through edgeq. An accepted bid reaches the shop, which confirms it; a
// bid that does not beat it is refused by edgeq with its page (409, in the visitor's language), and
// the highest-bid read edgeq serves shows the accepted bid.
async function bid() {
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

// still: a visitor waits 30 s on the waiting page of a queue that serves nobody. Everything the page
// loads (styles, script, icon, status polls) comes from edgeq: the Go side counts the shop's requests.
async function still() {
  const b = await browser(desktop);
  const { page } = b;
  const elsewhere = [];
  page.on('request', (r) => { if (!new URL(r.url()).pathname.startsWith('/_edgeq/')) elsewhere.push(r.url()); });
  try {
    await page.goto(base + '/still');
    expect(page.url().startsWith(base + '/_edgeq/wait/still'), 'not on the waiting page: ' + page.url());
    await page.waitForFunction(() => document.documentElement.classList.contains('js'));
    await page.waitForTimeout(30000);
    expect(page.url().startsWith(base + '/_edgeq/wait/still'), 'left the waiting page: ' + page.url());
    // Only the first navigation to /still (answered by edgeq's redirect) is outside /_edgeq/.
    expect(elsewhere.length === 1 && elsewhere[0] === base + '/still', 'requests outside edgeq: ' + elsewhere);
    // Headless Chromium fetches no icons; a desktop browser asks for /favicon.ico unless the page
    // declares one, so the page must declare edgeq's own.
    const icon = await page.$eval('link[rel=icon]', (l) => l.getAttribute('href')).catch(() => null);
    expect(icon && icon.startsWith('/_edgeq/static/favicon.'), 'icon: ' + icon);
    expect(b.consoleErrors.length === 0, 'errors: ' + b.consoleErrors);
  } finally {
    await b.close();
  }
}

// xss: markup in a queue title and in return is shown as text and never runs; return leading off-site
// falls back to "/".
async function xss() {
  const b = await browser(desktop);
  const { page } = b;
  try {
    const evil = '"><img src=x onerror=alert(1)><script>alert(2)</script>';
    await page.goto(base + '/_edgeq/wait/xss?return=' + encodeURIComponent('/p' + evil));
    await page.waitForFunction(() => document.documentElement.classList.contains('js'));
    const title = await text(page, 'h1');
    expect(title.includes('<script>'), 'the title markup is not shown as text: ' + title);
    expect(await page.$('h1 script, h1 img') === null, 'the title markup became elements');
    const ret = await page.getAttribute('#wait', 'data-return');
    expect(ret === '/p' + evil, 'return attribute changed: ' + ret);
    for (const target of ['//evil.example', 'https://evil.example/x', '/\\evil.example']) {
      await page.goto(base + '/_edgeq/wait/xss?return=' + encodeURIComponent(target));
      const r = await page.getAttribute('#wait', 'data-return');
      expect(r === '/', `return=${target} became ${r}`);
    }
    expect(b.dialogs.length === 0, 'a script ran: ' + b.dialogs.join(', '));
  } finally {
    await b.close();
  }
}

// api calls the admin API with the bearer key (the test's own view, beside the browser's).
async function api(path) {
  const resp = await fetch(env.EDGEQ_ADMIN_URL + path, { headers: { Authorization: 'Bearer ' + env.EDGEQ_ADMIN_KEY } });
  expect(resp.ok, `${path}: ${resp.status}`);
  return resp.json();
}

async function queueCard(page, id) {
  return page.locator(`.queue[data-queue="${id}"]`);
}

async function field(card, name) {
  return ((await card.locator(`[data-f="${name}"]`).textContent()) || '').trim();
}

// dashboard: the operator dashboard while the Go side runs a flash sale on queue "sale". Without the
// key the browser is refused; with it (Basic credentials) the numbers and charts move, and the
// controls change capacity, pause and resume the queue and move the serving position, live.
async function dashboard() {
  const bare = await fetch(env.EDGEQ_ADMIN_URL + '/dashboard');
  expect(bare.status === 401 && /^Basic /.test(bare.headers.get('www-authenticate') || ''),
    'dashboard without the key: ' + bare.status + ' ' + bare.headers.get('www-authenticate'));
  // A browser with a wrong key is refused: the 401 stays (or Chromium gives up asking).
  const wrong = await browser({ ...desktop, httpCredentials: { username: 'operator', password: 'not-the-key' } });
  try {
    let failed = '';
    const resp = await wrong.page.goto(env.EDGEQ_ADMIN_URL + '/dashboard').catch((e) => { failed = e.message; });
    expect((resp && resp.status() === 401) || failed.includes('ERR_INVALID_AUTH_CREDENTIALS'),
      'a wrong key: ' + (resp ? resp.status() : failed));
    expect(await wrong.page.$('#queues') === null, 'a wrong key shows the dashboard');
  } finally {
    await wrong.close();
  }

  const b = await browser({ viewport: { width: 1400, height: 1000 }, httpCredentials: { username: 'operator', password: env.EDGEQ_ADMIN_KEY } });
  const { page } = b;
  try {
    const resp = await page.goto(env.EDGEQ_ADMIN_URL + '/dashboard');
    expect(resp.status() === 200, 'dashboard answered ' + resp.status());
    const card = await queueCard(page, 'sale');
    await card.waitFor({ timeout: 15000 });
    const before = { positions: await field(card, 'positions'), stock: await page.locator('#products tbody tr').first().textContent() };
    log('at first', JSON.stringify(before));
    // Numbers move while the sale runs.
    await page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 6, null, { timeout: 20000 });
    const after = { positions: await field(card, 'positions'), stock: await page.locator('#products tbody tr').first().textContent() };
    log('later', JSON.stringify(after));
    expect(after.positions !== before.positions, 'serving/assigned did not move: ' + after.positions);
    expect(after.stock !== before.stock, 'remaining stock did not move: ' + after.stock);
    const points = Number(await card.locator('svg[data-chart="positions"]').getAttribute('data-points'));
    expect(points >= 5, 'the positions chart has ' + points + ' points');
    const line = await card.locator('svg[data-chart="waiting"] polyline').getAttribute('points');
    expect(line && line.split(' ').length >= 5, 'no waiting line: ' + line);
    expect((await page.locator('#admissions tbody tr').count()) >= 1 &&
      !(await text(page, '#admissions tbody')).includes('None'), 'no recent admissions');
    expect((await text(page, '#store')) === 'store: ok', 'store badge: ' + await text(page, '#store'));
    expect((await text(page, '#auctions tbody')).includes('7'), 'auction 7 missing: ' + await text(page, '#auctions tbody'));
    // The queue title with markup is text.
    expect((await field(await queueCard(page, 'xss'), 'title')).includes('<script>'), 'xss title not shown as text');

    // Capacity from the dashboard takes effect live.
    await card.locator('input[name="capacity"]').fill('8');
    await card.locator('button[data-action="capacity"]').click();
    await card.locator('[data-f="result"]', { hasText: 'capacity now 8' }).waitFor({ timeout: 10000 });
    let q = await api('/api/queue/sale');
    expect(q.capacity === 8, 'capacity after the control: ' + q.capacity);
    await page.waitForFunction(() => {
      const dd = document.querySelector('.queue[data-queue="sale"] [data-f="inside"]');
      return dd && / \/ 8$/.test(dd.textContent);
    }, null, { timeout: 10000 });
    await screenshot(page, 'dashboard');

    // Pause and resume.
    await card.locator('button[data-action="pause"]').click();
    await card.locator('[data-f="state"]', { hasText: 'paused' }).waitFor({ timeout: 10000 });
    q = await api('/api/queue/sale');
    expect(q.paused === true, 'not paused: ' + JSON.stringify(q));
    await card.locator('button[data-action="pause"]').click();
    await card.locator('[data-f="state"]', { hasText: 'running' }).waitFor({ timeout: 10000 });
    expect((await api('/api/queue/sale')).paused === false, 'not resumed');

    // Serve the next visitors by hand.
    const serving = (await api('/api/queue/sale')).serving_pos;
    await card.locator('input[name="increment"]').fill('2');
    await card.locator('button[data-action="increment"]').click();
    await card.locator('[data-f="result"]', { hasText: 'serving position now' }).waitFor({ timeout: 10000 });
    expect((await api('/api/queue/sale')).serving_pos >= serving, 'serving position went back');

    // A refused change is reported, not swallowed.
    await card.locator('input[name="capacity"]').fill('-1');
    await card.locator('button[data-action="capacity"]').click();
    await card.locator('[data-f="result"]', { hasText: 'refused' }).waitFor({ timeout: 10000 });
    expect((await api('/api/queue/sale')).capacity === 8, 'a refused capacity changed the queue');

    expect(b.dialogs.length === 0 && b.consoleErrors.length === 0, 'dialogs/errors: ' + b.dialogs + b.consoleErrors);
    // Arrivals and served per minute are measured over the same window.
    const rates = { arrivals: await field(card, 'arrivals'), served: await field(card, 'served') };
    log('rates', JSON.stringify(rates));
    expect(/^[\d.,]+$/.test(rates.arrivals) && /^[\d.,]+$/.test(rates.served), 'rates: ' + JSON.stringify(rates));
  } finally {
    await b.close();
  }

  // Opened with the credentials in its address (http://user:key@host/dashboard), as an operator may
  // bookmark it: every request still works.
  const signedIn = new URL(env.EDGEQ_ADMIN_URL + '/dashboard');
  signedIn.username = 'operator';
  signedIn.password = env.EDGEQ_ADMIN_KEY;
  const c = await browser(desktop);
  try {
    const resp = await c.page.goto(signedIn.href);
    expect(resp.status() === 200, 'dashboard with credentials in the URL: ' + resp.status());
    await c.page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 3, null, { timeout: 20000 });
    expect(await c.page.isHidden('#error'), 'error shown: ' + await text(c.page, '#error'));
    const card = await queueCard(c.page, 'sale');
    await card.locator('input[name="capacity"]').fill('8');
    await card.locator('button[data-action="capacity"]').click();
    await card.locator('[data-f="result"]', { hasText: 'capacity now 8' }).waitFor({ timeout: 10000 });
    expect(c.dialogs.length === 0 && c.consoleErrors.length === 0, 'dialogs/errors: ' + c.dialogs + c.consoleErrors);
    log('with credentials in the URL: polls', await c.page.getAttribute('body', 'data-polls'));
  } finally {
    await c.close();
  }
}

async function admin(method, path, body) {
  const resp = await fetch(env.EDGEQ_ADMIN_URL + path, {
    method, headers: { Authorization: 'Bearer ' + env.EDGEQ_ADMIN_KEY, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await resp.json().catch(() => ({}));
  expect(resp.ok, `${method} ${path}: ${resp.status} ${JSON.stringify(answer)}`);
  return answer;
}

// overflow checks that nothing on the page is wider than its box or the viewport: element boxes, not
// the picture. Returns the offenders.
async function overflow(page) {
  return page.evaluate(() => {
    const bad = [];
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > width + 1) bad.push('page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + width);
    for (const el of document.querySelectorAll('main *')) {
      const box = el.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;
      if (box.right > width + 1) bad.push(`${el.tagName}.${el.className}#${el.id} ends at ${Math.round(box.right)} > ${width}`);
      const style = getComputedStyle(el);
      if (style.display !== 'inline' && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 && el.tagName !== 'PROGRESS') {
        bad.push(`${el.tagName}.${el.className}#${el.id} text ${el.scrollWidth} > box ${el.clientWidth}: "${el.textContent.trim().slice(0, 40)}"`);
      }
    }
    return bad;
  });
}

// checkSizes looks at one page state in both languages at 320 and 1280 px, and screenshots it.
async function checkSizes(url, state, ready) {
  for (const locale of ['en', 'zh-TW']) {
    for (const [device, options] of [['phone', { ...phone, viewport: { width: 320, height: 700 } }], ['desktop', desktop]]) {
      const b = await browser({ ...options, locale });
      try {
        await b.page.goto(url);
        await ready(b.page);
        const bad = await overflow(b.page);
        expect(bad.length === 0, `${state} ${locale} ${device}: ${bad.join('; ')}`);
        if ((state === 'notopen' && device === 'desktop' && locale === 'en') || (state === 'prequeue' && device === 'phone' && locale === 'zh-TW') ||
            (state === 'paused' && device === 'desktop' && locale === 'en') || (state === 'soldout' && device === 'phone' && locale === 'en')) {
          await screenshot(b.page, `drop-${state}-${device}-${locale}`);
        }
      } finally {
        await b.close();
      }
    }
  }
}

function clock(s) {
  const m = /(\d+):(\d\d):(\d\d)$/.exec(s);
  return m ? Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]) : NaN;
}

// drops: a scheduled drop as a shopper sees it (CONTRACT 10.2). Not open yet (no place taken), the
// pre-queue's countdown, the opening (the browser ends on the shop's page, served), a paused line, a
// sell-out that ends the wait and the polling. No page state overflows at 320 or 1280 px.
async function drops() {
  // Not open yet: the opening in the visitor's time zone, a countdown, no place.
  const notOpen = base + '/_edgeq/wait/later?return=%2F';
  await checkSizes(notOpen, 'notopen', async (page) => {
    expect((await text(page, 'h1')) === 'Not open yet' || (await text(page, 'h1')) === '尚未開放', 'not the not-open page: ' + await text(page, 'h1'));
    const first = clock(await text(page, '.countdown'));
    expect(/^\d+ (d|天) \d\d:\d\d:\d\d$/.test(await text(page, '.countdown')), 'countdown: ' + await text(page, '.countdown'));
    await page.waitForTimeout(1100);
    expect(clock(await text(page, '.countdown')) < first || first === 0, 'the countdown does not count');
    expect(!/UTC$/.test(await text(page, 'time.local-time')), 'the opening is not in local time: ' + await text(page, 'time.local-time'));
  });
  expect((await admin('GET', '/api/queue/later')).assigned_pos === 0, 'a place was taken before the pre-queue');

  // The pre-queue: a place, a countdown to an opening an hour away, nobody served.
  const b = await browser(desktop);
  const { page } = b;
  try {
    await page.goto(base + '/orders/soon');
    expect(page.url().startsWith(base + '/_edgeq/wait/soon'), 'not on the waiting page: ' + page.url());
    expect((await text(page, 'h1')) === 'You are in the pre-queue', 'h1: ' + await text(page, 'h1'));
    expect((await page.textContent('main')).includes('drawn by lot'), 'the lottery is not explained');
    const first = clock(await text(page, '.countdown'));
    expect(first > 3000 && first <= 3600, 'countdown to the opening: ' + await text(page, '.countdown'));
    await page.waitForTimeout(1100);
    expect(clock(await text(page, '.countdown')) < first, 'the countdown does not count');
    await checkSizes(page.url(), 'prequeue', async (p) => { await p.waitForSelector('.countdown'); });
    // The operator opens the drop in four seconds: the page counts down to it, then takes the visitor on.
    await admin('PUT', '/api/queue', { queue_id: 'soon', opens_at: new Date(Date.now() + 4000).toISOString().replace(/\.\d+Z$/, 'Z') });
    // The page reloads when the opening moves (a moment without a countdown) and leaves at the opening.
    await page.waitForFunction(() => {
      const c = document.querySelector('.countdown');
      if (!c) return !location.pathname.startsWith('/_edgeq/wait/'); // left for the shop: the opening came
      const m = /(\d+):(\d\d):(\d\d)$/.exec(c.textContent);
      return m && Number(m[2]) * 60 + Number(m[3]) <= 6;
    }, null, { timeout: 15000 });
    await page.waitForURL(base + '/orders/soon', { timeout: 20000 });
    const cookies = await page.context().cookies();
    expect(cookies.some((c) => c.name === 'edgeq_tk_soon'), 'served without a token cookie');
    expect(b.consoleErrors.length === 0, 'errors: ' + b.consoleErrors);
    log('pre-queue → opening → served');
  } finally {
    await b.close();
  }

  // Paused: the notice appears while paused and goes when the line moves again.
  const w = await browser(desktop);
  try {
    await w.page.goto(base + '/orders/pause');
    expect(w.page.url().startsWith(base + '/_edgeq/wait/pause'), 'not waiting: ' + w.page.url());
    await w.page.waitForFunction(() => document.documentElement.classList.contains('js'));
    expect(await w.page.$('#paused') === null, 'paused before the pause');
    await admin('PUT', '/api/queue', { queue_id: 'pause', paused: true });
    await w.page.waitForSelector('#paused', { timeout: 15000 });
    expect((await text(w.page, '#paused')).startsWith('The line is paused'), 'paused notice: ' + await text(w.page, '#paused'));
    await checkSizes(w.page.url(), 'paused', async (p) => { await p.waitForSelector('#paused'); });
    await admin('PUT', '/api/queue', { queue_id: 'pause', paused: false });
    await w.page.waitForSelector('#paused', { state: 'detached', timeout: 15000 });
    log('paused notice shown and withdrawn');
  } finally {
    await w.close();
  }

  // Sold out: the last pair is bought; the waiting page turns into the sold-out page and stops polling.
  const g = await browser(desktop);
  try {
    const polls = [];
    g.page.on('request', (r) => { if (r.url().includes('/_edgeq/status/')) polls.push(Date.now()); });
    await g.page.goto(base + '/orders/gone');
    expect(g.page.url().startsWith(base + '/_edgeq/wait/gone'), 'not waiting: ' + g.page.url());
    await g.page.waitForFunction(() => document.documentElement.classList.contains('js'));
    const bought = await fetch(base + '/buy/last-pair', { method: 'POST', headers: { 'X-Buyer': 'e2e-buyer' } });
    expect(bought.status !== 409 && bought.status < 500, 'buying the last pair: ' + bought.status);
    const soldAt = Date.now();
    await g.page.waitForFunction(() => document.querySelector('h1') && document.querySelector('h1').textContent.trim() === 'Sold out', null, { timeout: 15000 });
    const took = Date.now() - soldAt;
    log('sold-out page', took, 'ms after the last unit');
    // One poll interval (4 s, jittered up to 4.8 s), the reload's spread (1.5 s) and a tick.
    expect(took < 7000, 'the sold-out page took ' + took + ' ms');
    expect(await g.page.$('script[src*="wait.js"]') === null, 'the sold-out page still loads the polling script');
    const after = polls.length;
    await g.page.waitForTimeout(10000);
    expect(polls.length === after, `the sold-out page polled ${polls.length - after} times in 10 s`);
    expect((await text(g.page, 'main')).includes('Your place is kept'), 'the waiting visitor is not told the place is kept');
    const bad = await overflow(g.page);
    expect(bad.length === 0, 'sold-out page of a waiting visitor: ' + bad.join('; '));
    await screenshot(g.page, 'drop-soldout-desktop-en');
    // A newcomer gets the sold-out page at once.
    await checkSizes(g.page.url(), 'soldout', async (p) => {
      const h = await text(p, 'h1');
      expect(h === 'Sold out' || h === '已售完', 'newcomer after the sell-out: ' + h);
    });
    log('sold out: the wait ended and polling stopped');
  } finally {
    await g.close();
  }
}

// invite: a presale by invitation while its line is full. A guest's browser opens a front invitation
// link (the page's script posts it) and lands on the shop; another browser opening the same link
// gets the used page; a visitor without one gets the invitation-only page; the dashboard shows the
// queue's invitations used and unused.
async function invite() {
  const made = await admin('POST', '/api/queue/vip/invites', { count: 2, ttl_second: 3600, front: true });
  expect(made.items.length === 2 && made.items[0].url.startsWith('/_edgeq/invite/vip/'), 'invitations: ' + JSON.stringify(made));
  const link = base + made.items[0].url + '?return=' + encodeURIComponent('/orders/vip');
  const guest = await browser(desktop);
  try {
    await guest.page.goto(link);
    await guest.page.waitForURL(base + '/orders/vip', { timeout: 10000 });
    expect(!(await guest.page.content()).includes('edgeq_'), 'the shop page is not the shop\'s');
    const cookies = (await guest.page.context().cookies()).map((c) => c.name);
    expect(cookies.includes('edgeq_tk_vip'), 'no token cookie: ' + cookies);
    // Back to the link in the same browser: on to the shop, not "used".
    await guest.page.goto(link);
    await guest.page.waitForURL(base + '/orders/vip', { timeout: 10000 });
  } finally {
    await guest.close();
  }
  const other = await browser(phone);
  try {
    await other.page.goto(link);
    await other.page.waitForSelector('h1');
    expect((await text(other.page, 'h1')) === 'Invitation already used', 'second browser: ' + await text(other.page, 'h1'));
    await screenshot(other.page, 'invite-used-phone-en');
    await other.page.goto(base + '/orders/vip');
    expect((await text(other.page, 'h1')) === 'By invitation only', 'uninvited: ' + await text(other.page, 'h1'));
  } finally {
    await other.close();
  }
  const b = await browser({ viewport: { width: 1400, height: 1000 }, httpCredentials: { username: 'operator', password: env.EDGEQ_ADMIN_KEY } });
  try {
    await b.page.goto(env.EDGEQ_ADMIN_URL + '/dashboard');
    const card = await queueCard(b.page, 'vip');
    await card.waitFor({ timeout: 15000 });
    await b.page.waitForFunction(() => {
      const dd = document.querySelector('.queue[data-queue="vip"] [data-f="invites"]');
      return dd && dd.textContent.trim() === '1 / 1 · invite only';
    }, null, { timeout: 10000 });
  } finally {
    await b.close();
  }
}

// deadletters: the dashboard lists two dead letters the Go side planted; Retry applies the good one
// (the admission appears in the admin API), Retry on the malformed one says why it failed and keeps
// it, Dismiss (confirmed) removes it.
async function deadletters() {
  const b = await browser({ viewport: { width: 1400, height: 1000 }, httpCredentials: { username: 'operator', password: env.EDGEQ_ADMIN_KEY } });
  const { page } = b;
  try {
    await page.goto(env.EDGEQ_ADMIN_URL + '/dashboard');
    const row = (id) => page.locator('#dead-letters tbody tr', { hasText: id });
    await row(env.GOOD).waitFor({ timeout: 15000 });
    await row(env.BAD).waitFor({ timeout: 15000 });
    await screenshot(page, 'dashboard-dead-letters');
    await row(env.GOOD).locator('button[data-action="retry"]').click();
    await page.locator('#dead-result', { hasText: env.GOOD + ' retried' }).waitFor({ timeout: 10000 });
    await row(env.GOOD).waitFor({ state: 'detached', timeout: 10000 });
    const admission = await api('/api/admissions/990001');
    expect(admission.state === 'admitted' && admission.product_id === 'jersey', 'the retried event: ' + JSON.stringify(admission));
    await row(env.BAD).locator('button[data-action="retry"]').click();
    await page.locator('#dead-result', { hasText: env.BAD + ':' }).waitFor({ timeout: 10000 });
    log('a failed retry says', await text(page, '#dead-result'));
    expect((await row(env.BAD).count()) === 1, 'a failed retry removed the dead letter');
    // Dismissing asks first: the browser's confirmation is accepted here.
    page.removeAllListeners('dialog');
    page.once('dialog', (d) => d.accept());
    await row(env.BAD).locator('button[data-action="dismiss"]').click();
    await page.locator('#dead-result', { hasText: env.BAD + ' dismissed' }).waitFor({ timeout: 10000 });
    await row(env.BAD).waitFor({ state: 'detached', timeout: 10000 });
    const left = await api('/api/dead-letters');
    expect(left.total_count === 0, 'dead letters left: ' + JSON.stringify(left));
  } finally {
    await b.close();
  }
}

const scenarios = { waitroom, nojs, turnstile, screenshots, shop, bid, still, xss, dashboard, drops, invite, deadletters };
const name = process.argv[2];
if (!scenarios[name]) {
  console.error('usage: node browser.mjs ' + Object.keys(scenarios).join('|'));
  process.exit(2);
}
scenarios[name]().then(() => log(name, 'ok'), (err) => { console.error('[e2e]', name, 'FAILED:', err.message); process.exit(1); });
