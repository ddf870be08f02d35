// Accessibility of the shopper pages: axe-core on every state, keyboard-only use, the live region that
// announces the line's news, and reduced motion.
import { base, expect, log } from './lib.mjs';
import { axeSource, axeTags, pixel, runAxe } from './checks.mjs';
import { admin, adminForm, goto, heading, jsReady, ownQueue, text } from './common.mjs';
import { builtIn, langs, openState, pagesBrowser, pageStates, sizes } from './states.mjs';

// axe: axe-core's WCAG 2.1 A and AA rules on every state, at desktop and phone sizes, in light and
// dark, in each language of LANGS. Every violation of every combination is listed before failing.
export async function axeScenario() {
  const problems = [];
  let runs = 0;
  let ruleIds = [];
  const incomplete = new Set();
  for (const lang of langs) {
    const b = await pagesBrowser(lang);
    try {
      for (const state of pageStates) {
        await openState(b, state, lang);
        if (lang === 'ar') {
          const dir = await b.page.getAttribute('html', 'dir');
          if (builtIn('ar')) expect(dir === 'rtl', `${state.name} ar: dir=${dir}`);
        }
        for (const [size, viewport] of Object.entries(sizes)) {
          await b.page.setViewportSize(viewport);
          for (const colorScheme of ['light', 'dark']) {
            await b.page.emulateMedia({ colorScheme });
            const r = await runAxe(b.page);
            runs++;
            r.incomplete.forEach((id) => incomplete.add(id));
            for (const v of r.violations) problems.push(`${state.name} ${lang} ${size} ${colorScheme}: ${v.id} (${v.impact}): ${v.targets.join(' | ')}`);
          }
        }
        await b.page.emulateMedia({ colorScheme: 'light' });
        await b.page.setViewportSize(sizes.desktop);
        if (state.leave) await state.leave(b.page);
      }
      if (ruleIds.length === 0) ruleIds = await b.page.evaluate((tags) => window.axe.getRules(tags).map((r) => r.ruleId), axeTags);
    } finally {
      await b.close();
    }
  }
  log(`axe-core ${axeSource.match(/axe v([\d.]+)/) ? axeSource.match(/axe v([\d.]+)/)[1] : ''} rules run (${axeTags.join(', ')}): ${ruleIds.join(' ')}`);
  log(`${runs} runs: ${pageStates.length} states x ${Object.keys(sizes).length} sizes x light/dark x ${langs.join('/')}; needing a human look (incomplete): ${[...incomplete].join(' ') || 'none'}`);
  expect(ruleIds.length > 40, 'axe ran only ' + ruleIds.length + ' rules');
  expect(problems.length === 0, `${problems.length} axe violations:\n  ${problems.join('\n  ')}`);
}

// focusOrder tabs through a page from its top and returns, for every stop, the element, whether it
// shows a focus indicator (an outline or a box shadow under :focus-visible) and its place in the
// document; it stops when focus leaves the page or comes back to the first stop.
async function focusOrder(page) {
  await fromTheTop(page);
  const stops = [];
  for (let i = 0; i < 20; i++) {
    await page.keyboard.press('Tab');
    const stop = await page.evaluate(() => {
      const el = document.activeElement;
      if (!el || el === document.body) return null;
      const style = getComputedStyle(el);
      const outline = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2;
      const shadow = style.boxShadow && style.boxShadow !== 'none';
      const all = [...document.querySelectorAll('*')];
      return {
        what: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().replace(/\s+/g, '.') : ''),
        focusVisible: el.matches(':focus-visible'), indicator: outline || shadow, index: all.indexOf(el),
        outline: `${style.outlineStyle} ${style.outlineWidth} ${style.outlineColor}`,
      };
    });
    if (!stop || (stops.length > 0 && stop.index === stops[0].index)) break;
    stops.push(stop);
  }
  return stops;
}

// fromTheTop makes the next Tab go to the page's first stop: a click at the top corner, on nothing
// focusable, moves the sequential focus starting point there (blur() alone leaves it where it was).
async function fromTheTop(page) {
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.mouse.click(2, 2);
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
}

function checkStops(name, stops, want) {
  const whats = stops.map((s) => s.what);
  log(name, 'tab order:', whats.join(' → '));
  expect(JSON.stringify(whats.map((w, i) => w.startsWith(want[i] || '?'))) === JSON.stringify(want.map(() => true)) && whats.length === want.length,
    `${name}: tab order ${whats.join(', ')}, want ${want.join(', ')}`);
  for (const s of stops) {
    expect(s.focusVisible && s.indicator, `${name}: ${s.what} has no visible focus (${s.outline})`);
  }
  for (let i = 1; i < stops.length; i++) expect(stops[i].index > stops[i - 1].index, `${name}: focus goes back up the page at ${stops[i].what}`);
}

// keyboard: keyboard-only use. On the waiting, challenge and expired pages in English and Arabic,
// every Tab stop shows its focus and the stops follow the page's order. The challenge is passed and
// the expired place rejoined with keys alone. The busy page's own retry stops once a key is pressed,
// and happens when none is.
export async function keyboard() {
  for (const lang of ['en', 'ar']) {
    const b = await pagesBrowser(lang);
    const { page } = b;
    try {
      for (const colorScheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme });
        await openState(b, pageStates.find((s) => s.name === 'waiting'), lang);
        checkStops(`waiting ${lang} ${colorScheme}`, await focusOrder(page), ['a#refresh']);

        await openState(b, pageStates.find((s) => s.name === 'expired'), lang);
        checkStops(`expired ${lang} ${colorScheme}`, await focusOrder(page), ['a.button']);
      }
      await page.emulateMedia({ colorScheme: 'light' });
      // Rejoin from the expired page with Tab and Enter.
      await fromTheTop(page);
      await page.keyboard.press('Tab');
      await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
      expect(await page.$('#wait') !== null, `${lang}: Enter on rejoin did not lead back to the line`);

      await openState(b, pageStates.find((s) => s.name === 'challenge'), lang);
      const stops = await focusOrder(page);
      checkStops(`challenge ${lang}`, stops, ['input', 'button.button']);
      // Keys alone: Space ticks the check, Tab and Enter send the form, and the shop's page comes.
      await fromTheTop(page);
      await page.keyboard.press('Tab');
      await page.keyboard.press('Space');
      await page.waitForFunction(() => {
        const input = document.querySelector('input[name=cf-turnstile-response]');
        return input && input.value.length > 0;
      });
      await page.keyboard.press('Tab');
      await Promise.all([page.waitForURL(base + '/auctions/42', { timeout: 10000 }), page.keyboard.press('Enter')]);
      expect((await heading(page)) === 'Signed match ball', `${lang}: after the challenge by keyboard: ${await heading(page)}`);
    } finally {
      await b.close();
    }
  }

  // The busy page: a key press stops the automatic retry (and takes its sentence away); untouched, it
  // retries after its 5 seconds.
  const b = await pagesBrowser('en');
  try {
    let loads = 0;
    b.page.on('framenavigated', (f) => { if (f === b.page.mainFrame()) loads++; });
    await goto(b.page, '/e2e/hold', 503);
    expect(await b.page.$('#retrying') !== null, 'no retry sentence');
    await b.page.keyboard.press('Tab');
    await b.page.waitForTimeout(6500);
    expect(loads === 1 && await b.page.$('#retrying') === null, `after a key press: ${loads} loads, sentence ${await b.page.$('#retrying') !== null}`);
    checkStops('busy', await focusOrder(b.page), ['a.button']);
    await goto(b.page, '/e2e/hold', 503);
    loads = 0;
    await b.page.waitForEvent('framenavigated', { timeout: 8000 });
    expect(loads >= 1, 'the busy page did not retry by itself');
    log('busy page: retries by itself, stops at a key press');
  } finally {
    await b.close();
  }
}

// liveregion: the waiting page's live region stays silent while polls bring the same place, speaks
// once when the line moves by a good part, once more for a pause, and not again for the same news.
export async function liveregion() {
  const q = await ownQueue('Sneaker drop');
  for (let i = 0; i < 20; i++) {
    const r = await fetch(base + '/_edgeq/assign_queue_pos', { method: 'POST', body: new URLSearchParams({ queue_id: q }) });
    expect(r.ok, 'join: ' + r.status);
  }
  for (const lang of ['en', 'ar']) {
    const b = await pagesBrowser(lang);
    const { page } = b;
    try {
      let polls = 0;
      page.on('request', (r) => { if (r.url().includes('/_edgeq/status/')) polls++; });
      await goto(page, `/_edgeq/wait/${q}?return=%2F`, 200);
      await jsReady(page);
      expect(await page.getAttribute('#announce', 'aria-live') === 'polite', 'no polite live region');
      expect(await page.$('[aria-live] #position, [aria-live] #ahead, [aria-live] .countdown, [aria-live] #updated') === null, 'ticking numbers inside a live region');
      await page.evaluate(() => {
        window.liveWrites = [];
        new MutationObserver(() => window.liveWrites.push(document.getElementById('announce').textContent))
          .observe(document.getElementById('announce'), { childList: true, characterData: true, subtree: true });
      });
      const ahead = Number(await text(page, '#ahead'));
      const start = polls;
      const deadline = Date.now() + 30000;
      while (polls - start < 3 && Date.now() < deadline) await page.waitForTimeout(250);
      expect(polls - start >= 3, `only ${polls - start} polls in 30 s`);
      let writes = await page.evaluate(() => window.liveWrites);
      expect(writes.length === 0 && Number(await text(page, '#ahead')) === ahead, `${lang}: ${polls - start} polls with the same place wrote the live region: ${JSON.stringify(writes)}`);
      log(lang, polls - start, 'polls at', ahead, 'ahead: the live region said nothing');

      // Half the line is served: said once, with the new count.
      await adminForm('/api/queue/increment_serving_position', { queue_id: q, increment_by: String(Math.ceil(ahead / 2)) });
      await page.waitForFunction(() => window.liveWrites.length > 0, null, { timeout: 15000 });
      const now = Number(await text(page, '#ahead'));
      const said = await text(page, '#announce');
      const aheadLabel = await page.$eval('#ahead', (dd) => dd.parentNode.querySelector('dt').textContent.trim());
      expect(now < ahead && said.includes(String(now)) && said.includes(aheadLabel), `${lang}: announced ${JSON.stringify(said)} for ${now} ahead`);
      const afterMove = polls;
      while (polls - afterMove < 2) await page.waitForTimeout(250);
      writes = await page.evaluate(() => window.liveWrites);
      expect(writes.length === 1, `${lang}: the move was announced ${writes.length} times: ${JSON.stringify(writes)}`);
      log(lang, 'announced once:', said);

      // A pause is news too.
      await admin('PUT', '/api/queue', { queue_id: q, paused: true });
      await page.waitForSelector('#paused', { timeout: 15000 });
      expect((await text(page, '#announce')) === (await text(page, '#paused')), `${lang}: the pause was not announced: ${await text(page, '#announce')}`);
      await admin('PUT', '/api/queue', { queue_id: q, paused: false });
      await page.waitForSelector('#paused', { state: 'detached', timeout: 15000 });
    } finally {
      await b.close();
    }
    // The next language's browser joins behind the ones served.
  }
}

// motion: with prefers-reduced-motion: reduce nothing on the pages moves: no element has a
// transition or an animation, and the progress bar's fill (a pseudo-element no style query reaches)
// is drawn at its new width at once, where without the preference it is still on its way. The
// browser's animations are slowed a hundredfold so the difference does not depend on timing.
export async function motion() {
  const b = await pagesBrowser('en');
  const { page } = b;
  try {
    await openState(b, pageStates.find((s) => s.name === 'waiting'), 'en');
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Animation.enable');
    await cdp.send('Animation.setPlaybackRate', { playbackRate: 0.01 });
    const accent = await page.evaluate(() => getComputedStyle(document.querySelector('.button.secondary')).color);
    const seen = {};
    for (const reducedMotion of ['no-preference', 'reduce']) {
      await page.emulateMedia({ reducedMotion });
      const moving = await page.evaluate(() => [...document.querySelectorAll('*')].filter((el) => {
        const s = getComputedStyle(el);
        return s.transitionDuration.split(',').some((d) => parseFloat(d) > 0) || s.animationName !== 'none';
      }).map((el) => el.tagName));
      // A copy of the bar next to it, which the page's own polls do not set (a poll answered
      // between the two values below would otherwise put the real bar back at the visitor's place).
      await page.evaluate(() => {
        document.getElementById('probe')?.remove();
        const bar = document.getElementById('progress');
        const probe = bar.cloneNode(true);
        probe.id = 'probe';
        probe.value = 5;
        bar.after(probe);
      });
      await page.waitForTimeout(200);
      await page.evaluate(() => { document.getElementById('probe').value = 95; });
      await page.waitForTimeout(100);
      seen[reducedMotion] = { moving, at80: await pixel(page, '#probe', 0.8, 0.5) };
    }
    log('motion:', JSON.stringify(seen), 'accent', accent);
    expect(seen.reduce.moving.length === 0, 'elements still moving under reduced motion: ' + seen.reduce.moving);
    expect(seen.reduce.at80 === accent, `reduced motion: the progress fill is not at once at 95% (${seen.reduce.at80}, accent ${accent})`);
    expect(seen['no-preference'].at80 !== accent, 'without the preference the fill jumped too: the check could not tell the difference');
  } finally {
    await b.close();
  }
}
