// The operator's dashboard: its sign-in, numbers, charts and controls during a sale, the invitations of
// a presale, and the dead letters it retries and dismisses.
import { base, env, expect, log, screenshot } from './lib.mjs';
import { admin, api, browser, desktop, field, phone, queueCard, text } from './common.mjs';

// dashboard: the operator dashboard while the Go side runs a flash sale on queue "sale". Without the
// key the browser is refused; with it (Basic credentials) the numbers and charts move, and the
// controls change capacity, pause and resume the queue and move the serving position, live.
export async function dashboard() {
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
    const opened = Date.now(); // no sample of the page is older
    const resp = await page.goto(env.EDGEQ_ADMIN_URL + '/dashboard');
    expect(resp.status() === 200, 'dashboard answered ' + resp.status());
    const card = await queueCard(page, 'sale');
    await card.waitFor({ timeout: 15000 });
    const jersey = page.locator('#products tbody tr', { hasText: '(jersey)' });
    const before = { positions: await field(card, 'positions'), stock: await jersey.textContent() };
    log('at first', JSON.stringify(before));
    // Numbers move while the sale runs.
    await page.waitForFunction(() => Number(document.body.dataset.polls || 0) >= 6, null, { timeout: 20000 });
    // The rates wait for samples spanning their window (15 s, a poll a second) rather than make a
    // minute's rate of a few seconds.
    const early = await page.evaluate(() => ({ at: Date.now(),
      arrivals: document.querySelector('[data-queue="sale"] [data-f="arrivals"]').textContent }));
    log('rates early', JSON.stringify({ seconds: (early.at - opened) / 1000, arrivals: early.arrivals }));
    expect(early.at - opened >= 15000 || early.arrivals === 'measuring',
      'a rate ' + (early.at - opened) + ' ms after the page opened: ' + early.arrivals);
    const after = { positions: await field(card, 'positions'), stock: await jersey.textContent() };
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
    // Arrivals and served per minute are measured over the same window, once the samples span it.
    await page.waitForTimeout(Math.max(0, opened + 16000 - Date.now()));
    await page.waitForFunction(() => /\d/.test(document.querySelector('[data-queue="sale"] [data-f="served"]').textContent),
      null, { timeout: 10000 }).catch(() => {});
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

// invite: a presale by invitation while its line is full. A guest's browser opens a front invitation
// link (the page's script posts it) and lands on the shop; another browser opening the same link
// gets the used page; a visitor without one gets the invitation-only page; the dashboard shows the
// queue's invitations used and unused.
export async function invite() {
  const made = await admin('POST', '/api/queue/vip/invites', { count: 2, ttl_second: 3600, front: true });
  expect(made.items.length === 2 && made.items[0].url.startsWith('/_edgeq/invite/vip/'), 'invitations: ' + JSON.stringify(made));
  const link = base + made.items[0].url + '?return=' + encodeURIComponent('/orders/vip');
  const guest = await browser(desktop);
  try {
    await guest.page.goto(link);
    await guest.page.waitForURL(base + '/orders/vip', { timeout: 10000 });
    expect(!(await guest.page.content()).includes('edgeq_'), 'the shop page is not the shop\'s');
    // The code was in the link: the shop page (and any analytics script on it) is told the origin only.
    const referrer = await guest.page.evaluate(() => document.referrer);
    expect(referrer === base + '/', 'the shop page\'s document.referrer: ' + referrer);
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
// (the admission appears in the admin list), Retry on the malformed one says why it failed and keeps
// it, Dismiss (confirmed) removes it.
export async function deadletters() {
  const b = await browser({ viewport: { width: 1400, height: 1000 }, httpCredentials: { username: 'operator', password: env.EDGEQ_ADMIN_KEY } });
  const { page } = b;
  try {
    await page.goto(env.EDGEQ_ADMIN_URL + '/dashboard');
    const row = (id) => page.locator('#dead-letters tbody tr', { hasText: id });
    await row(env.GOOD).waitFor({ timeout: 15000 });
    await row(env.BAD).waitFor({ timeout: 15000 });
    await screenshot(page, 'dashboard-dead-letters');
    const listed = async () => (await api('/api/admissions?page_size=100')).items.map((a) => a.id);
    expect(!(await listed()).includes(env.ADMISSION), 'the dead event\'s admission is listed before the retry');
    await row(env.GOOD).locator('button[data-action="retry"]').click();
    await page.locator('#dead-result', { hasText: env.GOOD + ' retried' }).waitFor({ timeout: 10000 });
    await row(env.GOOD).waitFor({ state: 'detached', timeout: 10000 });
    expect((await listed()).includes(env.ADMISSION), 'the retried event\'s admission is not listed');
    const admission = await api('/api/admissions/' + env.ADMISSION);
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
