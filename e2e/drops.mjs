// A scheduled drop as a shopper sees it: not open yet, the pre-queue, the opening, a pause and the
// sell-out, with the opening shown in the visitor's time zone and moved by the operator.
import { base, expect, log, screenshot } from './lib.mjs';
import { buttonRows, overflow } from './checks.mjs';
import { admin, browser, desktop, phone, text } from './common.mjs';

// checkSizes looks at one page state in both languages at 320 and 1280 px, and screenshots it. The
// browsers read English in New York and Traditional Chinese in Taipei (opening times in their zones).
async function checkSizes(url, state, ready) {
  for (const locale of ['en', 'zh-TW']) {
    for (const [device, options] of [['phone', { ...phone, viewport: { width: 320, height: 700 } }], ['desktop', desktop]]) {
      const b = await browser({ ...options, locale, timezoneId: locale === 'zh-TW' ? 'Asia/Taipei' : 'America/New_York' });
      try {
        await b.page.goto(url);
        await ready(b.page);
        const bad = [...await overflow(b.page), ...await buttonRows(b.page)];
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

// countdownSeconds reads a countdown, days included ("3 d 04:05:06", "3 天 04:05:06").
function countdownSeconds(s) {
  const m = /^(?:(\d+)\D+)?(\d+):(\d\d):(\d\d)$/.exec(s);
  return m ? Number(m[1] || 0) * 86400 + Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4]) : NaN;
}

// The drop's page states name the drop: its title is the heading, the state is the line under it.
async function named(page, title, phases, what) {
  const h = await text(page, 'h1');
  const phase = await page.$('hgroup > h1 + p.phase') ? await text(page, 'hgroup > p.phase') : '';
  expect(h === title && phases.includes(phase), `${what}: heading ${JSON.stringify(h)}, state ${JSON.stringify(phase)}; want ${JSON.stringify(title)} and one of ${JSON.stringify(phases)}`);
}

// The server's opening for pages without JavaScript, which the script replaces.
const serverClock = /^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/;

// checkOpening checks the opening a page shows against iso (RFC 3339) as the visitor's zone tz reads
// it: the datetime attribute, the day and the hour and minute in that zone (12 or 24 h, as the
// language writes it), the zone's name as the browser's own Intl gives it in the page's language, and
// a countdown that agrees to within a few seconds. Returns the shown text.
async function checkOpening(page, iso, tz, lang, what) {
  const shown = await text(page, 'time.local-time');
  const attr = await page.getAttribute('time.local-time', 'datetime');
  expect(attr === iso, `${what}: datetime ${attr}, want ${iso}`);
  expect(!serverClock.test(shown), `${what}: the opening is the server's UTC time: ${shown}`);
  const parts = Object.fromEntries(new Intl.DateTimeFormat('en-US', { timeZone: tz, hourCycle: 'h23', day: 'numeric', hour: 'numeric', minute: '2-digit' })
    .formatToParts(new Date(iso)).map((p) => [p.type, p.value]));
  const h24 = Number(parts.hour), h12 = h24 % 12 === 0 ? 12 : h24 % 12;
  const hours = [...new Set([h24, h12].flatMap((h) => [String(h), String(h).padStart(2, '0')]))];
  const hm = new RegExp(`(^|\\D)(${hours.join('|')}):${parts.minute}(\\D|$)`);
  const day = new RegExp(`(^|\\D)${Number(parts.day)}(\\D|$)`);
  expect(hm.test(shown) && day.test(shown), `${what}: shows ${JSON.stringify(shown)}, want day ${parts.day} at ${h24}:${parts.minute} in ${tz}`);
  const zone = await page.evaluate(([at, l]) => new Intl.DateTimeFormat(l, { timeZoneName: 'short' }).formatToParts(new Date(at))
    .find((p) => p.type === 'timeZoneName').value, [iso, lang]);
  expect(zone && shown.includes(zone), `${what}: shows ${JSON.stringify(shown)} without the zone ${JSON.stringify(zone)}`);
  const left = countdownSeconds(await text(page, '.countdown'));
  const want = (Date.parse(iso) - Date.now()) / 1000;
  expect(Math.abs(left - want) <= 3, `${what}: the countdown says ${left} s, the opening is ${Math.round(want)} s away`);
  return shown;
}

const zones = ['America/New_York', 'Asia/Taipei'];

// followsTheOperator opens url in a browser per time zone and language (en, zh-TW), checks the shown
// opening, moves the queue's opens_at four hours later through the admin API, and checks that every
// page shows the new opening (clock, zone, countdown) within `within` ms, without a reload.
async function followsTheOperator(url, queue, within, state) {
  const views = [];
  try {
    for (const timezoneId of zones) {
      for (const lang of ['en', 'zh-TW']) {
        const b = await browser({ ...desktop, locale: lang, timezoneId });
        views.push({ b, tz: timezoneId, lang, what: `${state} ${lang} ${timezoneId}` });
        await b.page.goto(url);
        await b.page.waitForFunction(() => {
          const t = document.querySelector('time.local-time');
          return t && !/^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/.test(t.textContent.trim());
        });
        expect(await b.page.getAttribute('html', 'lang') === lang, `${state}: page language ${await b.page.getAttribute('html', 'lang')}`);
      }
    }
    const opensAt = await views[0].b.page.getAttribute('time.local-time', 'datetime');
    for (const v of views) log(v.what, 'before:', await checkOpening(v.b.page, opensAt, v.tz, v.lang, v.what));
    for (const v of views) await v.b.page.evaluate(() => { window.notReloaded = true; });
    const moved = new Date(Date.parse(opensAt) + 4 * 3600 * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
    await admin('PUT', '/api/queue', { queue_id: queue, opens_at: moved });
    const movedAt = Date.now();
    await Promise.all(views.map(async (v) => {
      await v.b.page.waitForFunction((iso) => {
        const t = document.querySelector('time.local-time');
        return t && t.getAttribute('datetime') === iso;
      }, moved, { timeout: within });
      const took = Date.now() - movedAt;
      expect(await v.b.page.evaluate(() => window.notReloaded === true), `${v.what}: the page reloaded to learn the new opening`);
      log(v.what, `after ${took} ms:`, await checkOpening(v.b.page, moved, v.tz, v.lang, v.what + ' after the move'));
      expect(v.b.consoleErrors.length === 0, `${v.what}: errors ${v.b.consoleErrors}`);
    }));
    return moved;
  } finally {
    for (const v of views) await v.b.close();
  }
}

// drops: a scheduled drop as a shopper sees it (docs/operations.md "Running a drop"). Not open yet
// (no place taken), the pre-queue's countdown, the opening (the browser ends on the shop's page,
// served), a paused line, a sell-out that ends the wait and the polling. No page state overflows at
// 320 or 1280 px.
export async function drops() {
  // Not open yet: the opening in the visitor's time zone, a countdown, no place.
  const notOpen = base + '/_edgeq/wait/later?return=%2F';
  await checkSizes(notOpen, 'notopen', async (page) => {
    await named(page, "Next week's drop", ['Not open yet', '尚未開放'], 'not-open page');
    const first = clock(await text(page, '.countdown'));
    expect(/^\d+ (d|天) \d\d:\d\d:\d\d$/.test(await text(page, '.countdown')), 'countdown: ' + await text(page, '.countdown'));
    await page.waitForTimeout(1100);
    expect(clock(await text(page, '.countdown')) < first || first === 0, 'the countdown does not count');
    expect(!serverClock.test(await text(page, 'time.local-time')), 'the opening is not in local time: ' + await text(page, 'time.local-time'));
  });
  // The operator moves the opening: the not-open page (no place, no status to poll) learns it at its
  // slow look at the schedule (every 30 s, jittered up to 36 s), long before its reload (days away).
  await followsTheOperator(notOpen, 'later', 45000, 'not open');
  expect((await admin('GET', '/api/queue/later')).assigned_pos === 0, 'a place was taken before the pre-queue');

  // The pre-queue: a place, a countdown to an opening an hour away, nobody served.
  const b = await browser(desktop);
  const { page } = b;
  try {
    await page.goto(base + '/orders/soon');
    expect(page.url().startsWith(base + '/_edgeq/wait/soon'), 'not on the waiting page: ' + page.url());
    await named(page, 'Midnight drop', ['You are in the pre-queue'], 'pre-queue page');
    expect((await page.textContent('main')).includes('drawn by lot'), 'the lottery is not explained');
    const first = clock(await text(page, '.countdown'));
    expect(first > 3000 && first <= 3600, 'countdown to the opening: ' + await text(page, '.countdown'));
    await page.waitForTimeout(1100);
    expect(clock(await text(page, '.countdown')) < first, 'the countdown does not count');
    await checkSizes(page.url(), 'prequeue', async (p) => {
      await p.waitForSelector('.countdown');
      await named(p, 'Midnight drop', ['You are in the pre-queue', '你已在預先排隊中'], 'pre-queue page');
    });
    // The operator moves the opening: every pre-queue page shows it within one poll (4 s, jittered up
    // to 4.8 s; the replica's snapshot follows within 250 ms).
    await followsTheOperator(page.url(), 'soon', 6500, 'pre-queue');
    // Eleven places now (this page's, checkSizes', followsTheOperator's): room for all at the opening.
    await admin('PUT', '/api/queue', { queue_id: 'soon', capacity: 20 });
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
    await g.page.waitForFunction(() => document.querySelector('hgroup > p.phase') && document.querySelector('hgroup > p.phase').textContent.trim() === 'Sold out', null, { timeout: 15000 });
    await named(g.page, 'Last pairs', ['Sold out'], 'sold-out page of a waiting visitor');
    const took = Date.now() - soldAt;
    log('sold-out page', took, 'ms after the last unit');
    // One poll interval (4 s, jittered up to 4.8 s), the reload's spread (1.5 s) and a tick.
    expect(took < 7000, 'the sold-out page took ' + took + ' ms');
    expect(await g.page.$('script[src*="wait.js"]') === null, 'the sold-out page still loads the polling script');
    const after = polls.length;
    await g.page.waitForTimeout(10000);
    expect(polls.length === after, `the sold-out page polled ${polls.length - after} times in 10 s`);
    expect((await text(g.page, 'main')).includes('Your place is kept'), 'the waiting visitor is not told the place is kept');
    const bad = [...await overflow(g.page), ...await buttonRows(g.page)];
    expect(bad.length === 0, 'sold-out page of a waiting visitor: ' + bad.join('; '));
    await screenshot(g.page, 'drop-soldout-desktop-en');
    // A newcomer gets the sold-out page at once.
    await checkSizes(g.page.url(), 'soldout', async (p) => {
      await named(p, 'Last pairs', ['Sold out', '已售完'], 'newcomer after the sell-out');
    });
    log('sold out: the wait ended and polling stopped');
  } finally {
    await g.close();
  }
}
