// The shopper pages (TestBrowserPages, TestBrowserBranding): every state a shopper can see, each
// reached the way a shopper reaches it, and the browser that visits them from addresses of its own. The
// scenarios of a11y.mjs and pages.mjs go through them with axe-core, the keyboard, element boxes and
// pixels.
import { base, env, expect } from './lib.mjs';
import { admin, adminForm, browser, goto, heading, jsReady, ownQueue, text, unique } from './common.mjs';

export const sizes = { desktop: { width: 1280, height: 800 }, phone: { width: 375, height: 740 } };
export const langs = (env.LANGS || 'en').split(',');

// Every state and browser gets a client address of its own (edgeq trusts X-Forwarded-For from
// loopback in these stacks), so per-IP limits only bite where a state asks them to.
let lastAddress = (process.pid * 7919 + Date.now()) % 60000;
function freshAddress() {
  lastAddress = (lastAddress + 1) % 65536;
  return `198.18.${lastAddress >> 8}.${lastAddress & 255}`;
}

// The states. open(page) leaves the page showing the state; leave(page), if any, undoes what open
// changed in the browser.
export const pageStates = [
  {
    name: 'waiting', async open(page) {
      await goto(page, '/_edgeq/wait/line?return=%2Fproducts%2F1', 200);
      await jsReady(page);
      expect(/^\d+$/.test(await text(page, '#position')), 'no position');
    },
  },
  {
    name: 'lottery', async open(page) {
      await goto(page, '/_edgeq/wait/draw?return=%2F', 200);
      await jsReady(page);
      expect(await page.$('#position') === null && await page.$('#ahead') !== null, 'not the lottery page');
    },
  },
  {
    name: 'join', async open(page) {
      await goto(page, '/_edgeq/wait/club?return=%2F', 200);
      await page.waitForSelector('[data-testid=turnstile-checkbox]');
    },
  },
  {
    // Served: the page's script has seen the turn come and claims the token, which is held back here
    // so the page stays on its "your turn" notice.
    name: 'served', async open(page) {
      const q = await ownQueue('Sneaker drop');
      await page.route('**/_edgeq/generate_token', () => {});
      await goto(page, `/_edgeq/wait/${q}?return=%2F`, 200);
      await jsReady(page);
      await adminForm('/api/queue/increment_serving_position', { queue_id: q, increment_by: '1' });
      await page.waitForSelector('#notice:not([hidden])', { timeout: 15000 });
    },
    async leave(page) {
      await page.goto('about:blank'); // the held claim goes with its page, before it could be let through
      await page.unroute('**/_edgeq/generate_token');
    },
  },
  {
    name: 'notopen', async open(page) {
      await goto(page, '/_edgeq/wait/later?return=%2F', 200);
      await page.waitForSelector('#notopen .countdown');
    },
  },
  {
    name: 'countdown', async open(page) {
      await goto(page, '/_edgeq/wait/soon?return=%2F', 200);
      await page.waitForSelector('#wait .countdown');
    },
  },
  {
    name: 'paused', async open(page) {
      await goto(page, '/_edgeq/wait/pause?return=%2F', 200);
      await jsReady(page);
      await page.waitForSelector('#paused');
    },
  },
  {
    // Sold out while waiting: the place is kept, the page says so and polls no more.
    name: 'soldout-waiting', async open(page) {
      const q = await ownQueue('Last pairs');
      await goto(page, `/_edgeq/wait/${q}?return=%2F`, 200);
      await jsReady(page);
      await admin('PUT', '/api/queue', { queue_id: q, sold_out_with: ['sneaker-b'] });
      // The page learns it at its next poll and reloads into the sold-out page.
      await page.waitForFunction(() => document.readyState === 'complete' && !document.getElementById('wait') && document.querySelector('h1'), null, { timeout: 15000 });
      expect(await page.$('#wait') === null && await page.$('script[src*="wait."]') === null, 'still the waiting page');
    },
  },
  { name: 'soldout', async open(page) { await goto(page, '/_edgeq/wait/gone?return=%2F', 410); } },
  { name: 'closed', async open(page) { await goto(page, '/_edgeq/wait/shut?return=%2F', 410); } },
  {
    // Busy: the held route's only slot is taken (the Go side holds it). Its script, which retries by
    // itself, is kept out: these checks look at the page, the keyboard scenario at the script.
    name: 'busy', async open(page) {
      await page.route('**/_edgeq/static/busy.*.js', (r) => r.abort());
      await goto(page, '/e2e/hold', 503);
    },
    async leave(page) { await page.unroute('**/_edgeq/static/busy.*.js'); },
  },
  {
    name: 'expired', async open(page) {
      const q = await ownQueue('Sneaker drop');
      await goto(page, `/_edgeq/wait/${q}?return=%2F`, 200);
      const request = await page.getAttribute('#wait', 'data-request');
      // Given up (status 2), the place is skipped when the line reaches it: then it has expired.
      await adminForm('/api/queue/update_token_status', { queue_id: q, request_id: request, status: '2' });
      await adminForm('/api/queue/increment_serving_position', { queue_id: q, increment_by: '1' });
      await goto(page, `/_edgeq/wait/${q}?return=%2F`, 410);
    },
  },
  {
    name: 'challenge', async open(page) {
      await goto(page, '/auctions/42', 200);
      expect(page.url().startsWith(base + '/_edgeq/challenge'), 'not the challenge page: ' + page.url());
      await page.waitForSelector('[data-testid=turnstile-checkbox]');
    },
  },
  { name: 'notfound', async open(page) { await goto(page, '/_edgeq/wait/nowhere', 404); } },
  {
    // Rate limited: this state's address loads the page more than 20 times in a minute. The limiter
    // lets one more through every 3 s, which a slow machine can reach between the last refused fetch
    // and the page load: fetch until refused, then load, a few times over if need be.
    name: 'ratelimited', async open(page) {
      const path = '/_edgeq/wait/later?return=%2F';
      await goto(page, path, 200);
      for (let attempt = 1; ; attempt++) {
        const refused = await page.evaluate(async (url) => {
          for (let i = 0; i < 60; i++) {
            if ((await fetch(url, { headers: { Accept: 'text/html' } })).status === 429) return true;
          }
          return false;
        }, base + path);
        expect(refused, `${path}: 60 loads in a row and no 429`);
        const resp = await page.goto(base + path);
        if (resp && resp.status() === 429) break;
        expect(attempt < 5, `${path}: status ${resp && resp.status()} right after a 429, five times, want 429`);
      }
    },
  },
  {
    // The invitation page, as a guest without JavaScript sees it (its script posts it at once).
    name: 'invite', async open(page) {
      const made = await admin('POST', '/api/queue/vip/invites', { count: 1, ttl_second: 3600 });
      await page.route('**/_edgeq/static/invite.*.js', (r) => r.abort());
      await goto(page, made.items[0].url + '?return=%2F', 200);
    },
    async leave(page) { await page.unroute('**/_edgeq/static/invite.*.js'); },
  },
  {
    name: 'inviteused', async open(page) {
      const made = await admin('POST', '/api/queue/vip/invites', { count: 1, ttl_second: 3600 });
      const used = await fetch(base + made.items[0].url, { method: 'POST', redirect: 'manual' });
      expect(used.status === 303, 'using the invitation: ' + used.status);
      await goto(page, made.items[0].url + '?return=%2F');
      await page.waitForFunction(() => document.querySelector('h1') && !document.getElementById('invite'));
      expect(await page.$('#invite') === null, 'not the used page: ' + await heading(page));
    },
  },
  { name: 'inviteonly', async open(page) { await goto(page, '/_edgeq/wait/vip?return=%2F', 403); } },
  {
    name: 'bidtoolow', async open(page) {
      await page.context().addCookies([{ name: 'shop_session', value: unique('bidder'), url: base }]);
      await goto(page, '/auctions/7', 200);
      await page.fill('input[name=amount]', '21.00');
      const [resp] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
      expect(resp.status() === 409 && await page.$('#highest') !== null, 'not the bid-too-low page: ' + resp.status());
    },
  },
];

// pagesBrowser is a browser in a language whose requests to edgeq come from an address of its own
// (b.address; only edgeq's: another origin, such as the check widget's, would need a CORS preflight
// for the header).
export async function pagesBrowser(lang, options = {}) {
  const b = await browser({ viewport: sizes.desktop, ...options, locale: lang });
  b.address = freshAddress();
  const origin = new URL(base).origin;
  await b.page.route((url) => url.origin === origin, (route) =>
    route.continue({ headers: { ...route.request().headers(), 'x-forwarded-for': b.address } }));
  return b;
}

// openState shows a state from a new address and checks the page's language.
export async function openState(b, state, lang) {
  b.address = freshAddress();
  await state.open(b.page);
  const shown = await b.page.getAttribute('html', 'lang');
  expect(shown === lang || (!builtIn(lang) && shown === 'en'), `${state.name}: page language ${shown}, asked ${lang}`);
}

// builtIn: whether the server speaks lang (it falls back to English for the others).
export function builtIn(lang) {
  return (env.SERVER_LANGS || env.LANGS || 'en').split(',').includes(lang);
}
