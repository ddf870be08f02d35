// The shopper pages' layout and look: nothing sticks out at any width in any language, screenshots of
// every state, and a shop's own logo and accent colour.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { base, env, expect, log, screenshot } from './lib.mjs';
import { buttonRows, overflowAll, pixel, runAxe } from './checks.mjs';
import { goto, jsReady } from './common.mjs';
import { langs, openState, pagesBrowser, pageStates, sizes } from './states.mjs';

// overflow: every state in every language of LANGS at 320 and 1280 px: nothing wider than its box or
// the viewport. Three languages at a time, each in its own browser: most of a state's time is spent
// waiting for the page's next poll.
export async function overflowScenario() {
  const problems = [];
  const pending = [...langs];
  await Promise.all([1, 2, 3].map(async () => {
    for (let lang = pending.shift(); lang; lang = pending.shift()) await overflowIn(lang, problems);
  }));
  log(`${pageStates.length} states x ${langs.length} languages x 320/1280 px`);
  expect(problems.length === 0, `${problems.length} overflows:\n  ${problems.join('\n  ')}`);
}

async function overflowIn(lang, problems) {
  const b = await pagesBrowser(lang);
  try {
    for (const state of pageStates) {
      await openState(b, state, lang);
      for (const width of [320, 1280]) {
        await b.page.setViewportSize({ width, height: 800 });
        for (const bad of [...await overflowAll(b.page), ...await buttonRows(b.page)]) problems.push(`${state.name} ${lang} ${width}px: ${bad}`);
      }
      await b.page.setViewportSize(sizes.desktop);
      if (state.leave) await state.leave(b.page);
    }
  } finally {
    await b.close();
  }
  log('overflow checked:', lang);
}

// states: screenshots of every state in English, Japanese and Arabic, desktop and phone, light; and
// a few in dark. Written as docs/screenshots/states/state-<state>-<device>-<lang>[-dark].png. Each
// language's browser is in a time zone of its own, so opening times show a zone other than UTC.
export async function statesScenario() {
  const zone = { en: 'America/New_York', ja: 'Asia/Tokyo', ar: 'Asia/Riyadh' };
  const dark = new Set(['waiting desktop en', 'waiting phone ar', 'notopen phone ja', 'busy desktop en', 'challenge phone en']);
  // One device pixel per CSS pixel keeps the 120-odd pictures small (the README's are taken at 2).
  const phoneDevice = { viewport: sizes.phone, deviceScaleFactor: 1, isMobile: true, hasTouch: true };
  for (const lang of ['en', 'ja', 'ar']) {
    for (const [device, options] of [['desktop', { viewport: sizes.desktop }], ['phone', phoneDevice]]) {
      const b = await pagesBrowser(lang, { ...options, timezoneId: zone[lang] });
      try {
        for (const state of pageStates) {
          await openState(b, state, lang);
          await b.page.waitForTimeout(150);
          await stateShot(b.page, `state-${state.name}-${device}-${lang}`);
          if (dark.has(`${state.name} ${device} ${lang}`)) {
            await b.page.emulateMedia({ colorScheme: 'dark' });
            await stateShot(b.page, `state-${state.name}-${device}-${lang}-dark`);
            await b.page.emulateMedia({ colorScheme: 'light' });
          }
          if (state.leave) await state.leave(b.page);
        }
      } finally {
        await b.close();
      }
    }
  }
}

async function stateShot(page, name) {
  if (!env.SCREENSHOT_DIR) return;
  const dir = join(env.SCREENSHOT_DIR, 'states');
  mkdirSync(dir, { recursive: true });
  // Transitions (the progress bar's fill) are finished first: the picture shows where the page settles.
  await page.screenshot({ path: join(dir, name + '.png'), fullPage: true, animations: 'disabled' });
}

// branding: a waiting browser on a page with the shop's logo and accent colour (TestBrowserBranding).
// Everything it loads comes from edgeq (the Go side counts the shop's requests); the logo is edgeq's
// URL and is drawn; the accent (ACCENT, ACCENT_DARK, computed by the Go side) is what the buttons'
// styles say and what the progress bar's fill is drawn with, in both schemes and both directions;
// the branded pages pass axe too.
export async function branding() {
  const problems = [];
  for (const lang of ['en', 'ar']) {
    const b = await pagesBrowser(lang);
    const { page } = b;
    const elsewhere = [];
    page.on('request', (r) => { if (!new URL(r.url()).pathname.startsWith('/_edgeq/')) elsewhere.push(r.url()); });
    try {
      await page.goto(base + '/products/1');
      expect(page.url().startsWith(base + '/_edgeq/wait/line'), 'not on the waiting page: ' + page.url());
      await jsReady(page);
      const logo = await page.$eval('header img.logo', (img) => ({ src: img.src, alt: img.alt, w: img.naturalWidth, h: img.naturalHeight, complete: img.complete, shown: img.getBoundingClientRect().width }));
      expect(logo.complete && logo.w > 0 && logo.h > 0 && logo.shown > 0, 'the logo is not drawn: ' + JSON.stringify(logo));
      expect(/\/_edgeq\/static\/logo\.[0-9a-f]{10}\.svg$/.test(new URL(logo.src).pathname) && new URL(logo.src).origin === base, 'the logo is not edgeq\'s: ' + logo.src);
      expect(logo.alt === 'Sneaker Shop' && await page.$('header .brand span, header.brand > span') === null, 'alt text / brand text: ' + logo.alt);
      for (const [scheme, accent, fg] of [['light', env.ACCENT, env.ACCENT_FG], ['dark', env.ACCENT_DARK, env.ACCENT_DARK_FG]]) {
        await page.emulateMedia({ colorScheme: scheme });
        const refresh = await page.$eval('#refresh', (a) => ({ color: getComputedStyle(a).color, border: getComputedStyle(a).borderTopColor }));
        expect(refresh.color === accent && refresh.border === accent, `${lang} ${scheme}: the refresh button is ${JSON.stringify(refresh)}, want ${accent}`);
        // The fill starts on the reading side: the left in English, the right in Arabic.
        const rtl = (await page.getAttribute('html', 'dir')) === 'rtl';
        const fill = await pixel(page, '#progress', rtl ? 0.97 : 0.03, 0.5);
        const track = await pixel(page, '#progress', rtl ? 0.03 : 0.97, 0.5);
        expect(fill === accent && track !== accent, `${lang} ${scheme}: progress fill ${fill}, track ${track}, want the fill ${accent} (${rtl ? 'rtl' : 'ltr'})`);
        for (const size of ['desktop', 'phone']) {
          await page.setViewportSize(sizes[size]);
          for (const v of (await runAxe(page)).violations) problems.push(`branded waiting ${lang} ${size} ${scheme}: ${v.id}: ${v.targets.join(' | ')}`);
        }
        await page.setViewportSize(sizes.desktop);
        if (lang === 'en' && scheme === 'light') await screenshot(page, 'brand-wait-desktop-en');
        if (lang === 'ar' && scheme === 'dark') await screenshot(page, 'brand-wait-desktop-ar-dark');
      }
      await page.emulateMedia({ colorScheme: 'light' });
      // Waiting a while: the page polls edgeq and nothing else.
      let polls = 0;
      page.on('request', (r) => { if (r.url().includes('/_edgeq/status/')) polls++; });
      const until = Date.now() + 30000;
      while (polls < 3 && Date.now() < until) await page.waitForTimeout(250);
      expect(polls >= 3, 'the page did not poll');
      expect(elsewhere.length === 1 && elsewhere[0] === base + '/products/1', 'requests outside edgeq: ' + elsewhere);

      // A page with a filled button: edgeq's own not-found page.
      await goto(page, '/_edgeq/wait/nowhere', 404);
      for (const [scheme, accent, fg] of [['light', env.ACCENT, env.ACCENT_FG], ['dark', env.ACCENT_DARK, env.ACCENT_DARK_FG]]) {
        await page.emulateMedia({ colorScheme: scheme });
        const button = await page.$eval('a.button', (a) => ({ bg: getComputedStyle(a).backgroundColor, fg: getComputedStyle(a).color }));
        expect(button.bg === accent && button.fg === fg, `${lang} ${scheme}: the button is ${JSON.stringify(button)}, want ${accent} on ${fg}`);
        for (const v of (await runAxe(page)).violations) problems.push(`branded 404 ${lang} ${scheme}: ${v.id}: ${v.targets.join(' | ')}`);
      }
      expect(b.consoleErrors.length === 0, 'errors: ' + b.consoleErrors);
      log(lang, 'logo', logo.w + 'x' + logo.h, 'accent', env.ACCENT, '/', env.ACCENT_DARK, 'on buttons and the progress bar');
    } finally {
      await b.close();
    }
  }
  expect(problems.length === 0, `${problems.length} axe violations:\n  ${problems.join('\n  ')}`);
}
