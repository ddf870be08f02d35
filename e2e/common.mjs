// Helpers the scenarios of browser.mjs share: the browsers they open and the devices they emulate,
// reading and loading a page, and calls to edgeq's admin API (EDGEQ_ADMIN_URL, EDGEQ_ADMIN_KEY).
import { base, env, expect, launch } from './lib.mjs';

export const desktop = { viewport: { width: 1280, height: 800 } };
export const phone = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true };

// browser opens a fresh Chromium with its own new --user-data-dir (lib.mjs's launch); its page errors
// are consoleErrors.
export async function browser(options = {}) {
  const { page, dialogs, errors, close } = await launch(options);
  return { page, dialogs, consoleErrors: errors, close };
}

export async function text(page, selector) {
  return ((await page.textContent(selector)) || '').trim();
}

export async function complete(queue, requestID) {
  const resp = await fetch(env.EDGEQ_ADMIN_URL + '/api/queue/update_token_status', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + env.EDGEQ_ADMIN_KEY, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ queue_id: queue, request_id: requestID, status: '1' }),
  });
  expect(resp.ok, `completing ${requestID} of ${queue}: ${resp.status} ${await resp.text()}`);
}

// api calls the admin API with the bearer key (the test's own view, beside the browser's).
export async function api(path) {
  const resp = await fetch(env.EDGEQ_ADMIN_URL + path, { headers: { Authorization: 'Bearer ' + env.EDGEQ_ADMIN_KEY } });
  expect(resp.ok, `${path}: ${resp.status}`);
  return resp.json();
}

export async function queueCard(page, id) {
  return page.locator(`.queue[data-queue="${id}"]`);
}

export async function field(card, name) {
  return ((await card.locator(`[data-f="${name}"]`).textContent()) || '').trim();
}

export async function admin(method, path, body) {
  const resp = await fetch(env.EDGEQ_ADMIN_URL + path, {
    method, headers: { Authorization: 'Bearer ' + env.EDGEQ_ADMIN_KEY, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await resp.json().catch(() => ({}));
  expect(resp.ok, `${method} ${path}: ${resp.status} ${JSON.stringify(answer)}`);
  return answer;
}

let uniq = 0;
export function unique(prefix) {
  uniq++;
  return `${prefix}-${process.pid}-${uniq}`;
}

export async function jsReady(page) {
  await page.waitForFunction(() => document.documentElement.classList.contains('js'));
}

export async function adminForm(path, form) {
  const resp = await fetch(env.EDGEQ_ADMIN_URL + path, {
    method: 'POST', body: new URLSearchParams(form),
    headers: { Authorization: 'Bearer ' + env.EDGEQ_ADMIN_KEY, 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  expect(resp.ok, `${path}: ${resp.status} ${await resp.text()}`);
}

// A queue of this browser's own, for states that change a queue (served, sold out while waiting,
// expired), so no other browser sees the change.
export async function ownQueue(title) {
  const id = unique('q');
  await admin('POST', '/api/queue', { queue_id: id, title, capacity: 0 });
  return id;
}

export async function goto(page, path, expectStatus) {
  const resp = await page.goto(base + path);
  if (expectStatus) expect(resp && resp.status() === expectStatus, `${path}: status ${resp && resp.status()}, want ${expectStatus}`);
  return resp;
}

export async function heading(page) {
  return text(page, 'h1');
}
