// The waiting room as a visitor meets it: waiting for a place, without JavaScript, behind a check
// widget, in two languages and sizes, on a queue that serves nobody, and with markup in what it shows.
import { base, env, expect, log, screenshot } from './lib.mjs';
import { browser, complete, desktop, phone, text } from './common.mjs';

// waitroom: a gated product page while another visitor holds the only slot. The waiting page shows
// the position and an estimated wait, keeps the position across a reload, and lands on the shop page
// by itself once the slot frees.
export async function waitroom() {
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
export async function nojs() {
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
// and the visitor lands on the shop page when the slot frees. WIDGET=hcaptcha: the same with hCaptcha's.
export async function turnstile() {
  const widget = env.WIDGET === 'hcaptcha'
    ? { box: '[data-testid=hcaptcha-checkbox]', field: 'textarea[name=h-captcha-response]', shot: 'hcaptcha-join-desktop-en' }
    : { box: '[data-testid=turnstile-checkbox]', field: 'input[name=cf-turnstile-response]', shot: 'turnstile-join-desktop-en' };
  const b = await browser(desktop);
  const { page } = b;
  try {
    await page.goto(base + '/auctions/42');
    expect(page.url().startsWith(base + '/_edgeq/wait/club'), 'not on the waiting page: ' + page.url());
    await page.waitForSelector(widget.box);
    await page.check(widget.box);
    await page.waitForFunction((field) => {
      const input = document.querySelector(field);
      return input && input.value.length > 0;
    }, widget.field);
    await screenshot(page, widget.shot);
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
export async function screenshots() {
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

// still: a visitor waits 30 s on the waiting page of a queue that serves nobody. Everything the page
// loads (styles, script, icon, status polls) comes from edgeq: the Go side counts the shop's requests.
export async function still() {
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
export async function xss() {
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
