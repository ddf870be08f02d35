// Shoppers who close their waiting page or leave it in the background: how long their place holds.
import { base, env, expect, log } from './lib.mjs';
import { admin, browser, complete, desktop, goto, jsReady, unique } from './common.mjs';

// Visitors who leave, and visitors whose page is in the background (TestBrowserNoShows). Headless
// Chromium reports every page as visible and neither throttles nor freezes a page's timers
// (Page.setWebLifecycleState "frozen" left the page polling every 15 s), so hide tells the page it
// went into the background the way the browser does (visibilityState, hidden, a visibilitychange
// event) and, with freeze, stops its timers as a frozen background tab's are: setTimeout schedules
// nothing from then on (the poll already scheduled still runs once).
async function hide(page, freeze = true) {
  await page.evaluate((freeze) => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
    document.dispatchEvent(new Event('visibilitychange'));
    if (freeze) {
      window.frozenTimers = window.setTimeout;
      window.setTimeout = () => 0;
    }
  }, freeze);
}

async function show(page) {
  await page.evaluate(() => {
    if (window.frozenTimers) window.setTimeout = window.frozenTimers;
    delete document.visibilityState;
    delete document.hidden;
    document.dispatchEvent(new Event('visibilitychange'));
  });
}

async function queueInfo(id) {
  return admin('GET', '/api/queue/' + id);
}

// waitingPage opens queue's waiting page in a new browser and returns it with its request id once its
// script runs; beats collects what the page said of itself (POST .../beat/).
async function waitingPage(queue) {
  const b = await browser(desktop);
  b.beats = [];
  b.page.on('request', (r) => { if (r.url().includes('/_edgeq/beat/')) b.beats.push(r.postData()); });
  await goto(b.page, `/_edgeq/wait/${queue}?return=%2Forders`, 200);
  await jsReady(b.page);
  b.request = await b.page.getAttribute('#wait', 'data-request');
  expect(/^[0-9a-f-]{36}$/.test(b.request || ''), 'no request id on the waiting page');
  return b;
}

async function until(what, within, cond) {
  const end = Date.now() + within;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what}: not within ${within / 1000} s`);
}

// closed: a visitor closes the waiting page, which goes into the background first as a closing tab
// does (its grace as a background page would hold the place for minutes): when its turn comes its
// place holds the capacity for gone_after (10 s), then the next visitor is served.
export async function closed() {
  const gone = await waitingPage('door');
  const next = await waitingPage('door');
  try {
    await hide(gone.page, false);
    await until('the page said it went into the background', 5000, async () => gone.beats.includes('page=hidden'));
    // As a person closes a tab: the page's unload handlers run (Playwright's default skips them).
    await gone.page.close({ runBeforeUnload: true });
    const before = await queueInfo('door');
    await complete('door', env.HOLDER);
    const turn = Date.now();
    await until('the closed page reached', 3000, async () => (await queueInfo('door')).serving_pos > before.serving_pos);
    await until('the closed page\'s place freed', 20000, async () => (await queueInfo('door')).serving_pos >= before.serving_pos + 2);
    const freed = (Date.now() - turn) / 1000;
    log('the closed page\'s place freed', freed.toFixed(1), 's after its turn');
    expect(freed <= 15, `the closed page held its place ${freed} s, want at most 15`);
    expect(freed >= 8, `the closed page's place freed after ${freed} s: before gone_after, so it was never held`);
    await next.page.waitForURL(base + '/orders', { timeout: 15000 });
    const answer = await fetch(`${base}/_edgeq/status/door/${gone.request}`);
    const st = await answer.json();
    expect(answer.status === 410 && st.queue_status === 'expired', `the closed page's place: ${answer.status} ${JSON.stringify(st)}`);
  } finally {
    await gone.close();
    await next.close();
  }
}

// drawnAndGone: a pre-queue of five with a lottery at the opening, three of whom closed their pages
// before it: each one drawn holds the only place for gone_after at most, so the two who stayed are
// both served well before position_expiry (5 min).
export async function drawnAndGone() {
  const id = unique('lot');
  const opens = new Date(Date.now() + 25000);
  await admin('POST', '/api/queue', { queue_id: id, title: 'Drawn and gone', capacity: 1, opens_at: opens.toISOString().replace(/\.\d+Z$/, 'Z'),
    prequeue_second: 600, shuffle: true });
  const pages = [];
  try {
    for (let i = 0; i < 5; i++) pages.push(await waitingPage(id));
    for (const b of pages.slice(0, 3)) await b.page.close();
    const stayed = pages.slice(3);
    await until('the opening', 40000, async () => (await queueInfo(id)).state === 'open');
    const opened = Date.now();
    // The first who stayed and is served finishes at once (the shop's checkout would complete it).
    const landed = [];
    await until('both who stayed served', 60000, async () => {
      for (const b of stayed) {
        if (!landed.includes(b) && b.page.url() === base + '/orders') {
          landed.push(b);
          log('served', ((Date.now() - opened) / 1000).toFixed(1), 's after the opening');
          await complete(id, b.request);
        }
      }
      return landed.length === stayed.length;
    });
    const took = (Date.now() - opened) / 1000;
    expect(took < 3 * 10 + 2 * 6 + 10, `the line took ${took} s past three who left`);
    const info = await queueInfo(id);
    log('serving', info.serving_pos, 'of', info.assigned_pos, 'after', took.toFixed(1), 's');
  } finally {
    for (const b of pages) await b.close();
  }
}

// background: a waiting page goes into the background (hidden and frozen) for five minutes, its turn
// comes while it is still there: its place holds, the visitor behind it waits; back in view, the page
// is let in.
export async function background() {
  const b = await waitingPage('bg');
  try {
    const behind = await fetch(base + '/_edgeq/assign_queue_pos', { method: 'POST', body: new URLSearchParams({ queue_id: 'bg' }) });
    expect(behind.ok, 'the visitor behind: ' + behind.status);
    await hide(b.page);
    await until('the page said it went into the background', 5000, async () => b.beats.includes('page=hidden'));
    const hiddenAt = Date.now();
    // The poll scheduled before the page was hidden still runs (within 5 s); none after it.
    await new Promise((r) => setTimeout(r, 6000));
    const polls = [];
    b.page.on('request', (r) => { if (r.url().includes('/_edgeq/status/')) polls.push(r.url()); });
    while (Date.now() - hiddenAt < 5 * 60 * 1000 + 5000) {
      await new Promise((r) => setTimeout(r, 30000));
      log('in the background for', Math.round((Date.now() - hiddenAt) / 1000), 's');
    }
    expect(polls.length === 0, 'the frozen page polled: ' + polls.length);
    const before = await queueInfo('bg');
    await complete('bg', env.HOLDER);
    await until('the background page reached', 3000, async () => (await queueInfo('bg')).serving_pos > before.serving_pos);
    await new Promise((r) => setTimeout(r, 20000));
    const info = await queueInfo('bg');
    expect(info.serving_pos === before.serving_pos + 1, `the background page's place was given away: serving ${info.serving_pos}, was ${before.serving_pos}`);
    log('after', Math.round((Date.now() - hiddenAt) / 1000), 's in the background its place holds');
    await show(b.page);
    await b.page.waitForURL(base + '/orders', { timeout: 15000 });
    log('back in view: let in');
  } finally {
    await b.close();
  }
}
