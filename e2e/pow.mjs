// Browser scenarios of the proof-of-work check (challenge.provider pow): static/pow.js and its worker in
// headless Chromium, and the server's refusals of solutions that must not pass. pow_test.go starts
// edgeq with a pow queue, another one and a checked route, then runs
//
//   node pow.mjs <scenario>
//
// with the addresses and the names it configured in the environment.
import { solve } from '../static/pow-worker.js';
import { axe, base, env, expect, launch, log, run, screenshot, until } from './lib.mjs';

const queue = env.POW_QUEUE; // turnstile: true, capacity > 0; its page is env.POW_PAGE
const otherQueue = env.POW_OTHER_QUEUE;
const ttl = Number(env.POW_TTL_SECONDS); // challenge.pow.ttl
const desktop = { viewport: { width: 1280, height: 800 } };
const joinPage = `/_edgeq/wait/${queue}?return=${encodeURIComponent(env.POW_PAGE)}`;
const challengePage = `/_edgeq/challenge?return=${encodeURIComponent(env.POW_CHECKED)}`;

// ---- Talking to edgeq as a script would.

// counter is edgeq_challenge_verifications_total{provider="pow",result} on the admin listener.
async function counter(result) {
  const text = await (await fetch(env.EDGEQ_ADMIN_URL + '/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(`edgeq_challenge_verifications_total{provider="pow",result="${result}"} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

// counted runs fn and checks that it added n to the counter of result.
async function counted(result, n, fn) {
  const before = await counter(result);
  const value = await fn();
  const added = (await counter(result)) - before;
  expect(added === n, `result ${result} counted ${added} times, want ${n}`);
  return value;
}

// challenge fetches one for query (queue_id=ID or route=NAME), from client address `from` when given
// (loopback is a trusted proxy in this stack, so X-Forwarded-For is the client).
async function challenge(query, from) {
  const resp = await fetch(`${base}/_edgeq/pow_challenge?${query}`, { headers: from ? { 'X-Forwarded-For': from } : {} });
  if (!resp.ok) throw new Error(`pow_challenge?${query}: ${resp.status} ${await resp.text()}`);
  const c = await resp.json();
  expect(typeof c.challenge === 'string' && c.challenge.length === 64 && c.difficulty === 12 && c.expires_in === ttl,
    'unexpected challenge ' + JSON.stringify(c));
  return c;
}

// join posts a solution to the join endpoint as a same-site form, and returns the status and body.
async function join(queueID, c, nonce, from) {
  const headers = { 'Content-Type': 'application/x-www-form-urlencoded', Origin: new URL(base).origin, Accept: 'application/json' };
  if (from) headers['X-Forwarded-For'] = from;
  const resp = await fetch(`${base}/_edgeq/assign_queue_pos`, {
    method: 'POST', headers, body: new URLSearchParams({ queue_id: queueID, pow_challenge: c.challenge, pow_nonce: nonce }),
  });
  return { status: resp.status, body: await resp.text() };
}

function joined(r, what) {
  expect(r.status === 200 && /"request_id":"[^"]+"/.test(r.body), `${what}: ${r.status} ${r.body}`);
}

function refused(r, what) {
  expect(r.status === 403 && r.body.includes('INVALID_TURNSTILE_TOKEN'), `${what}: ${r.status} ${r.body}, want 403 INVALID_TURNSTILE_TOKEN`);
}

// ---- In the browser.

// watch records, from before the page's own scripts run, every change of the check's status line
// (the live region: what a screen reader is told) and of its progress bar. The record is kept in the
// tab's sessionStorage, so it outlives the form's submission; seen(page) reads it.
async function watch(page) {
  await page.addInitScript(() => {
    const record = (kind, value) => {
      const seen = JSON.parse(sessionStorage.getItem('powSeen') || '{"status":[],"progress":[]}');
      seen[kind].push(value);
      sessionStorage.setItem('powSeen', JSON.stringify(seen));
    };
    new MutationObserver((records) => {
      for (const r of records) {
        const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
        if (!el || !el.classList) continue;
        if (el.classList.contains('pow-status') && r.type !== 'attributes') record('status', el.textContent.trim());
        if (el.classList.contains('pow-progress') && r.type === 'attributes') record('progress', el.value);
      }
    }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['value'] });
  });
}

async function seen(page) {
  return page.evaluate(() => JSON.parse(sessionStorage.getItem('powSeen') || '{"status":[],"progress":[]}'));
}

// harder makes the page solve challenges of `bits` difficulty instead of the server's 12, for a bar
// that has time to move. A nonce found for more zero bits still meets the server's 12: the solution
// passes as it would have. bits 0 stops changing them.
async function harder(page) {
  const state = { bits: 0 };
  await page.route((url) => url.pathname.endsWith('/_edgeq/pow_challenge'), async (route) => {
    const resp = await route.fetch();
    const c = await resp.json();
    if (state.bits > 0) c.difficulty = state.bits;
    await route.fulfill({ response: resp, json: c });
  });
  return state;
}

// check is what the page's check shows and holds now.
async function check(page) {
  return page.evaluate(() => {
    const box = document.querySelector('.pow');
    return {
      status: box.querySelector('.pow-status').textContent.trim(),
      progress: box.querySelector('.pow-progress').value,
      challenge: box.querySelector('input[name=pow_challenge]').value,
      nonce: box.querySelector('input[name=pow_nonce]').value,
      done: box.dataset.powDone, failed: box.dataset.powFailed,
      live: box.querySelector('.pow-status').getAttribute('aria-live'),
    };
  });
}

// solved waits until the page's check is done and returns its state.
async function solved(page) {
  await page.waitForFunction(() => {
    const box = document.querySelector('.pow');
    return box && box.querySelector('input[name=pow_nonce]').value !== '';
  }, null, { timeout: 30000 });
  const s = await check(page);
  expect(s.status === s.done && s.progress === 100 && s.challenge.length === 64 && /^\d+$/.test(s.nonce), 'not done: ' + JSON.stringify(s));
  return s;
}

// picture takes a screenshot (when SCREENSHOT_DIR is set) once the bar's fill has finished its
// transition (.6 s in edgeq.css).
async function picture(page, name) {
  if (!env.SCREENSHOT_DIR) return;
  await page.waitForTimeout(800);
  await screenshot(page, name);
}

// placeCookie is the browser's place in the pow queue (edgeq_rq_<queue>), if any.
async function placeCookie(b) {
  return (await b.context.cookies(base)).find((c) => c.name === `edgeq_rq_${queue}`);
}

// left reports whether the page has moved on from the check (false while it is navigating).
async function left(page) {
  try {
    return (await page.$('.pow')) === null && (await page.$('h1')) !== null;
  } catch {
    return false;
  }
}

// join (a): the waiting page of the pow queue shows the check working, its bar moves while the worker
// searches, the status says "done" once (no running count in the live region), and Join takes a
// place: the browser leaves the join form with a place cookie.
async function joinScenario() {
  const b = await launch(desktop);
  const { page } = b;
  try {
    await watch(page);
    const hard = await harder(page);
    hard.bits = 18;
    const resp = await page.goto(base + env.POW_PAGE);
    expect(page.url() === base + joinPage, 'not on the join form: ' + page.url());
    expect(resp.headers()['content-security-policy'].includes("script-src 'self';"), 'CSP: ' + resp.headers()['content-security-policy']);
    // What the page says while it works, as edgeq served it.
    const served = (await resp.text()).match(/<p class="pow-status" role="status" aria-live="polite">([^<]+)<\/p>/);
    expect(served && served[1].startsWith('Your browser is doing a short calculation'), 'no working status in the page');
    const working = served[1];
    expect(await page.isVisible('progress.pow-progress'), 'no progress bar');

    const s = await solved(page);
    const told = await seen(page);
    log('status changes', JSON.stringify(told.status), 'progress', told.progress.join(' '), 'nonce', s.nonce);
    expect(JSON.stringify(told.status) === JSON.stringify([working, s.done]), 'the live region was told: ' + JSON.stringify(told.status));
    expect(told.progress.at(-1) === 100 && told.progress.every((v, i) => i === 0 || v >= told.progress[i - 1]), 'the bar went back: ' + told.progress);
    // The worker reports every 8192 nonces: one that found a later nonce made the bar move first.
    if (Number(s.nonce) >= 8192) {
      expect(told.progress.some((v) => v > 0 && v < 100), 'the bar never moved before the answer: ' + told.progress);
    }
    expect(s.live === 'polite', 'the status is not a polite live region');
    await picture(page, 'pow-join-done-desktop-en');

    const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url() === base + joinPage);
    await page.click('button[type=submit]');
    const form = new URLSearchParams((await posted).postData());
    expect(form.get('pow_challenge') === s.challenge && form.get('pow_nonce') === s.nonce, 'the form did not send the solution: ' + form);
    await until('the page to move on', 15000, () => left(page));
    const cookie = await placeCookie(b);
    expect(cookie && cookie.value, 'no place cookie after joining');
    log('joined; now on', page.url(), 'heading', (await page.textContent('h1')).trim());
    await screenshot(page, 'pow-joined-desktop-en');
    // A place in a queue with room: the waiting page takes the visitor on to the shop's page.
    await page.waitForURL(base + env.POW_PAGE, { timeout: 30000 });
    const heading = (await page.textContent('h1')).trim();
    expect(heading === env.POW_PAGE_HEADING, 'landed on: ' + heading);
    log('landed on', page.url(), heading);
    expect(b.errors.length === 0 && b.dialogs.length === 0, 'page errors: ' + b.errors + b.dialogs);
  } finally {
    await b.close();
  }
}

// early: Join pressed while the worker is still searching is held, and the form goes by itself, with
// the solution, as soon as the answer is in.
async function earlyScenario() {
  const b = await launch(desktop);
  const { page } = b;
  try {
    const hard = await harder(page);
    hard.bits = 20;
    let clicked = false;
    for (let attempt = 0; attempt < 3 && !clicked; attempt++) {
      await page.goto(base + joinPage);
      await page.waitForFunction(() => document.querySelector('.pow-progress').value > 0, null, { timeout: 15000 }).catch(() => {});
      // Checked and pressed in one turn of the page's event loop: the answer cannot come in between.
      clicked = await page.evaluate(() => {
        const box = document.querySelector('.pow');
        if (box.querySelector('input[name=pow_nonce]').value !== '') return false;
        document.querySelector('button[type=submit]').click();
        return true;
      });
    }
    expect(clicked, 'the worker was always done before the button could be pressed');
    const posted = await page.waitForRequest((r) => r.method() === 'POST' && r.url() === base + joinPage, { timeout: 30000 });
    const form = new URLSearchParams(posted.postData());
    expect(form.get('pow_challenge').length === 64 && /^\d+$/.test(form.get('pow_nonce')), 'sent without the solution: ' + form);
    await until('a place', 15000, async () => (await left(page)) && (await placeCookie(b)));
    log('held until solved, then sent; now on', page.url());
    expect(b.errors.length === 0, 'page errors: ' + b.errors);
  } finally {
    await b.close();
  }
}

// renew: shortly before a challenge's life runs out the page fetches and solves a new one, quietly:
// the status goes on saying "done". Join pressed during that renewal is held, the status says the
// browser is working again, and the form goes with the new answer: nothing expired is sent.
async function renewScenario() {
  const b = await launch(desktop);
  const { page } = b;
  try {
    await watch(page);
    const hard = await harder(page);
    await page.goto(base + joinPage);
    const first = await solved(page);
    const working = (await seen(page)).status[0];
    hard.bits = 22; // the renewal takes long enough to press Join during it
    log(`solved; waiting for the renewal of the ${ttl} s challenge`);
    const posted = page.waitForRequest((r) => r.method() === 'POST' && r.url() === base + joinPage, { timeout: (ttl + 40) * 1000 });
    await until('the renewal', (ttl + 5) * 1000, () => page.evaluate(() => {
      // Checked and pressed in one turn of the page's event loop.
      const box = document.querySelector('.pow');
      if (box.querySelector('input[name=pow_nonce]').value !== '') return false;
      const quiet = box.querySelector('.pow-status').textContent === box.dataset.powDone && box.querySelector('.pow-progress').value === 100;
      document.querySelector('button[type=submit]').click();
      return quiet ? 'quiet' : 'loud';
    }).then((v) => { if (v === 'loud') throw new Error('the renewal was not quiet'); return v; }));
    const form = new URLSearchParams((await counted('expired', 0, () => counted('success', 1, async () => {
      const r = await posted;
      await until('a place', 15000, async () => (await left(page)) && (await placeCookie(b)));
      return r;
    }))).postData());
    expect(form.get('pow_challenge').length === 64 && form.get('pow_challenge') !== first.challenge && /^\d+$/.test(form.get('pow_nonce')),
      'sent: ' + form);
    const told = await seen(page);
    log('status changes', JSON.stringify(told.status));
    expect(JSON.stringify(told.status) === JSON.stringify([working, first.done, working, first.done]),
      'the live region was told: ' + JSON.stringify(told.status));
    expect(b.errors.length === 0, 'page errors: ' + b.errors);
  } finally {
    await b.close();
  }
}

// failed: a challenge that cannot be fetched, or a worker that cannot start, shows data-pow-failed
// in the live region (asking to reload), and the bar does not claim it is done.
async function failedScenario() {
  for (const [what, pattern, status] of [
    ['no challenge', (url) => url.pathname.endsWith('/_edgeq/pow_challenge'), 503],
    ['no worker', (url) => /\/pow-worker\.[0-9a-f]+\.js$/.test(url.pathname), 404],
  ]) {
    const b = await launch(desktop);
    const { page } = b;
    try {
      await page.route(pattern, (route) => route.fulfill({ status, contentType: 'text/plain', body: 'unavailable' }));
      await page.goto(base + joinPage);
      await page.waitForFunction(() => {
        const box = document.querySelector('.pow');
        return box.querySelector('.pow-status').textContent === box.dataset.powFailed;
      }, null, { timeout: 15000 });
      const s = await check(page);
      expect(s.failed.includes('reload') && s.progress < 100 && s.nonce === '', `${what}: ${JSON.stringify(s)}`);
      log(`${what}: "${s.status}"`);
    } finally {
      await b.close();
    }
  }
}

// replay (b): the solution a browser joined with, posted again, is refused (replayed), at the join
// endpoint and on the waiting page's form, which shows the join form again with the failure notice.
async function replayScenario() {
  const b = await launch(desktop);
  const { page } = b;
  let s;
  try {
    await page.goto(base + joinPage);
    s = await solved(page);
    await counted('success', 1, async () => {
      await page.click('button[type=submit]');
      await until('a place', 15000, async () => (await left(page)) && (await placeCookie(b)));
    });
  } finally {
    await b.close();
  }
  const c = { challenge: s.challenge };
  await counted('replayed', 1, async () => refused(await join(queue, c, s.nonce), 'the same solution again'));
  const resp = await counted('replayed', 1, () => fetch(base + joinPage, {
    method: 'POST', redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: new URL(base).origin, Accept: 'text/html' },
    body: new URLSearchParams({ pow_challenge: s.challenge, pow_nonce: s.nonce }),
  }));
  const html = await resp.text();
  expect(resp.status === 403 && html.includes('class="pow"') && html.includes('role="alert"'), `the form again: ${resp.status} ${html.slice(0, 400)}`);
  log('replays refused: 403 INVALID_TURNSTILE_TOKEN, and the join form with its notice');
}

// expired (c): a challenge solved (here in Node, with the page's own solver) and sent after its ttl is
// refused; one sent at once passes.
async function expiredScenario() {
  const old = await challenge('queue_id=' + queue);
  const fresh = await challenge('queue_id=' + queue);
  await counted('success', 1, async () => joined(await join(queue, fresh, solve(fresh.challenge, fresh.difficulty, 0, 1)), 'a fresh solution'));
  log(`waiting ${ttl + 1} s, past the challenge's life`);
  await new Promise((resolve) => setTimeout(resolve, (ttl + 1) * 1000));
  const nonce = solve(old.challenge, old.difficulty, 0, 1);
  await counted('expired', 1, async () => refused(await join(queue, old, nonce), 'an expired solution'));
}

// visitor (d): a solution is bound to the visitor's network and to its queue. Fetched by 198.51.100.7
// and sent by 203.0.113.9 it is refused; a solution for one queue does not join another. Neither
// refusal spends it: sent as it was meant, it then passes.
async function visitorScenario() {
  const first = '198.51.100.7';
  const c = await challenge('queue_id=' + queue, first);
  const nonce = solve(c.challenge, c.difficulty, 0, 1);
  await counted('invalid', 1, async () => refused(await join(queue, c, nonce, '203.0.113.9'), 'from another network'));
  await counted('invalid', 1, async () => refused(await join(otherQueue, c, nonce, first), 'for another queue'));
  await counted('success', 1, async () => joined(await join(queue, c, nonce, '198.51.100.99'), 'from its own network'));

  // The challenge page's solution is for routes, not for a join.
  const page = await challenge('route=*', first);
  await counted('invalid', 1, async () => refused(await join(queue, page, solve(page.challenge, page.difficulty, 0, 1), first), "the challenge page's for a join"));
  log('another network, another queue, another scope: refused');
}

// nojs (e): without JavaScript the join form says plainly that the check needs it.
async function nojsScenario() {
  const b = await launch({ ...desktop, javaScriptEnabled: false });
  const { page } = b;
  try {
    await page.goto(base + joinPage);
    const notice = page.locator('noscript p.notice, p.notice').filter({ hasText: 'JavaScript' });
    expect(await notice.count() === 1 && await notice.isVisible(), 'no visible notice');
    const text = (await notice.textContent()).trim();
    expect(text === 'This check needs JavaScript. Please turn on JavaScript in your browser and reload the page.', 'notice: ' + text);
    log('notice:', text, '| the working box is', (await page.isVisible('.pow')) ? 'shown' : 'hidden');
    await screenshot(page, 'pow-join-nojs-desktop-en');
  } finally {
    await b.close();
  }
}

// route (f): a checked route sends the browser to the challenge page, whose check solves; Continue
// sets the clearance and lands on the shop's page.
async function routeScenario() {
  const b = await launch(desktop);
  const { page } = b;
  try {
    await page.goto(base + env.POW_CHECKED);
    expect(page.url() === base + challengePage, 'not on the challenge page: ' + page.url());
    const box = await page.getAttribute('.pow', 'data-pow-url');
    expect(box === '/_edgeq/pow_challenge?route=%2a' || box === '/_edgeq/pow_challenge?route=%2A', 'challenge URL ' + box);
    await solved(page);
    await picture(page, 'pow-challenge-done-desktop-en');
    await counted('success', 1, () => Promise.all([page.waitForURL(base + env.POW_CHECKED), page.click('button[type=submit]')]));
    const heading = (await page.textContent('h1')).trim();
    expect(heading === env.POW_CHECKED_HEADING, 'landed on: ' + heading);
    const cookies = await b.context.cookies(base);
    expect(cookies.some((c) => c.name === 'edgeq_clearance'), 'no clearance cookie');
    // The clearance holds: the route opens again without a check.
    await page.goto(base + env.POW_CHECKED);
    expect(page.url() === base + env.POW_CHECKED, 'challenged again: ' + page.url());
    log('landed on', page.url(), heading);
    expect(b.errors.length === 0, 'page errors: ' + b.errors);
  } finally {
    await b.close();
  }
}

// axeScenario (g): the join form and the challenge page in every language of LANGS, while the bar
// moves and once done: no axe-core violation, the page's language and direction, and the check's own
// words in that language. Colours do not change with the language: dark is looked at in English and
// the two right-to-left languages.
async function axeScenario() {
  const langs = env.LANGS.split(',');
  const problems = [];
  let runs = 0;
  const english = {};
  const schemes = (lang) => (['en', 'ar', 'he'].includes(lang) ? ['light', 'dark'] : ['light']);
  for (const lang of langs) {
    // A browser in the language: its Accept-Language is what edgeq picks the page's language by.
    const b = await launch({ ...desktop, locale: lang });
    const { page } = b;
    try {
      const hard = await harder(page);
      for (const [name, path] of [['join', joinPage], ['challenge', challengePage]]) {
        // Running: a difficulty the worker needs a while for, caught with the bar between 1 and 99.
        hard.bits = 24;
        const running = await until(`${name} ${lang} running`, 60000, async () => {
          await page.goto(base + path);
          return page.waitForFunction(() => {
            const bar = document.querySelector('.pow-progress');
            if (document.querySelector('input[name=pow_nonce]').value !== '') return 'done';
            return bar.value >= 1 && bar.value <= 99 ? String(bar.value) : false;
          }, null, { timeout: 20000 }).then((h) => h.jsonValue()).then((v) => (v === 'done' ? false : v), () => false);
        });
        const html = await page.evaluate(() => ({ lang: document.documentElement.lang, dir: document.documentElement.dir }));
        expect(html.lang === lang, `${name}: lang ${html.lang}, asked ${lang}`);
        expect(html.dir === (lang === 'ar' || lang === 'he' ? 'rtl' : 'ltr'), `${name} ${lang}: dir ${html.dir}`);
        const words = await check(page);
        if (lang === 'en') english[name] = words;
        else if (english[name]) {
          expect(words.status !== english[name].status && words.done !== english[name].done && words.failed !== english[name].failed,
            `${name} ${lang}: the check speaks English`);
        }
        for (const colorScheme of schemes(lang)) {
          await page.emulateMedia({ colorScheme });
          for (const v of await axe(page)) problems.push(`${name} running ${lang} ${colorScheme}: ${v}`);
          runs++;
          if (['en', 'ar', 'he', 'ja'].includes(lang)) await screenshot(page, `pow-${name}-running-${lang}-${colorScheme}`);
        }
        await page.emulateMedia({ colorScheme: 'light' });
        log(`${name} ${lang}: axe on a running check (bar at ${running}%)`);

        // Done: the server's own difficulty.
        hard.bits = 0;
        await page.goto(base + path);
        await solved(page);
        for (const colorScheme of schemes(lang)) {
          await page.emulateMedia({ colorScheme });
          for (const v of await axe(page)) problems.push(`${name} done ${lang} ${colorScheme}: ${v}`);
          runs++;
          if (['en', 'ar', 'he'].includes(lang)) await picture(page, `pow-${name}-done-${lang}-${colorScheme}`);
        }
        await page.emulateMedia({ colorScheme: 'light' });
      }
      expect(b.errors.length === 0, `${lang}: page errors: ${b.errors}`);
    } finally {
      await b.close();
    }
  }
  log(`${runs} axe runs (${langs.length} languages x join/challenge x running/done, dark too in en, ar, he)`);
  expect(problems.length === 0, `${problems.length} axe violations:\n  ${problems.join('\n  ')}`);
}

run({
  join: joinScenario, early: earlyScenario, renew: renewScenario, failed: failedScenario, replay: replayScenario, expired: expiredScenario, visitor: visitorScenario,
  nojs: nojsScenario, route: routeScenario, axe: axeScenario,
});
