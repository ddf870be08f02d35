// Helpers shared by the browser scenarios that Go tests run with `node <file>.mjs <scenario>` (pow.mjs
// and the modules of browser.mjs): headless Chromium started the way every e2e browser is, assertions
// and log lines in the format the Go runner prints, axe-core's WCAG rules, screenshots, and the scenario
// dispatch of pow.mjs.
import { chromium } from 'playwright-core';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const env = process.env;
// edgeq's public listener, as the Go test started it.
export const base = env.EDGEQ_URL;

const chromiumBinary = env.CHROMIUM || '/usr/bin/chromium';
// Chromium with no network traffic of its own (updates, sync, QUIC probes) and no first-run pages.
export const chromiumSwitches = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

// expect throws (failing the scenario) when ok is false.
export function expect(ok, message) {
  if (!ok) throw new Error(message);
}

export function log(...parts) {
  console.log('[e2e]', ...parts);
}

// launch starts Chromium on a new, empty profile directory, removed again by close(). options go to
// playwright's launchPersistentContext (viewport, locale, javaScriptEnabled, ...). Page errors and
// dialogs are collected for the scenario to look at.
export async function launch(options = {}) {
  const profile = mkdtempSync(join(tmpdir(), 'edgeq-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumBinary,
    headless: true,
    args: chromiumSwitches,
    locale: 'en-US',
    ...options,
  });
  const page = context.pages().length > 0 ? context.pages()[0] : await context.newPage();
  const errors = [];
  const dialogs = [];
  page.on('pageerror', (err) => errors.push(String(err)));
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    dialog.dismiss().catch(() => {});
  });
  return {
    context, page, errors, dialogs,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

// screenshot saves the whole page as SCREENSHOT_DIR/<name>.png when SCREENSHOT_DIR is set.
export async function screenshot(page, name) {
  const dir = env.SCREENSHOT_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
  log('screenshot', name);
}

// The rules the pages are held to: WCAG 2.0 and 2.1, levels A and AA.
export const axeTags = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];
let axeScript = null;

// axe runs axe-core (from e2e/node_modules) on the page as it is now and returns its violations, one
// line each: the rule, its impact and the elements. The library is evaluated through the debugging
// protocol, not added as a <script>, so the page's Content-Security-Policy stays as edgeq sent it.
export async function axe(page) {
  if (axeScript === null) {
    const file = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
    axeScript = readFileSync(file, 'utf8');
  }
  const loaded = await page.evaluate(() => Boolean(window.axe && window.axe.run));
  if (!loaded) await page.evaluate(axeScript);
  return page.evaluate(async (tags) => {
    const options = { resultTypes: ['violations'], runOnly: { type: 'tag', values: tags } };
    const { violations } = await window.axe.run(document, options);
    return violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(' | ')}`);
  }, axeTags);
}

// until polls cond every 100 ms until it returns a true value, which it returns; past `ms` it fails
// with `what`.
export async function until(what, ms, cond) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await cond();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// run calls the scenario named by the first argument and exits 1 if it throws, 2 if there is none.
export function run(scenarios) {
  const name = process.argv[2];
  const scenario = scenarios[name];
  if (!scenario) {
    console.error(`usage: node ${process.argv[1]} ${Object.keys(scenarios).join('|')}`);
    process.exit(2);
  }
  scenario().then(
    () => log(name, 'ok'),
    (err) => {
      console.error('[e2e]', name, 'FAILED:', err && err.stack ? err.stack : err);
      process.exit(1);
    },
  );
}
