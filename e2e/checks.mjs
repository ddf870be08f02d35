// Checks of a page as drawn that several scenarios make: axe-core's rules, element boxes that stick out,
// buttons side by side of unequal height, and the colour of a pixel.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { env } from './lib.mjs';

// AXE_EXTRA_TAGS adds rule tags for a look beyond the WCAG 2.1 A and AA rules (best-practice, wcag22aa: none fail today).
export const axeTags = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', ...(env.AXE_EXTRA_TAGS ? env.AXE_EXTRA_TAGS.split(',') : [])];

export const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

// runAxe runs axe-core's rules of axeTags on the page as it is now and returns the violations, each with
// its elements and why they fail, and the ids of the rules that need a human look (incomplete).
export async function runAxe(page) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) {
    // Evaluated by the browser's debugging protocol, not as a <script>: the pages' CSP stays on.
    await page.evaluate(axeSource);
  }
  return page.evaluate(async (tags) => {
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] });
    return {
      violations: r.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ') + (n.failureSummary ? ' [' + n.failureSummary.replace(/\s+/g, ' ').slice(0, 160) + ']' : '')) })),
      incomplete: r.incomplete.map((v) => v.id),
    };
  }, axeTags);
}

// overflow checks that nothing on the page is wider than its box or the viewport: element boxes, not
// the picture. Returns the offenders.
export async function overflow(page) {
  return page.evaluate(() => {
    const bad = [];
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > width + 1) bad.push('page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + width);
    for (const el of document.querySelectorAll('main *')) {
      const box = el.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;
      if (box.right > width + 1) bad.push(`${el.tagName}.${el.className}#${el.id} ends at ${Math.round(box.right)} > ${width}`);
      const style = getComputedStyle(el);
      if (style.display !== 'inline' && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 && el.tagName !== 'PROGRESS') {
        bad.push(`${el.tagName}.${el.className}#${el.id} text ${el.scrollWidth} > box ${el.clientWidth}: "${el.textContent.trim().slice(0, 40)}"`);
      }
    }
    return bad;
  });
}

// overflowAll is overflow() for the whole body, and for right-to-left pages also what sticks out on
// the left.
export async function overflowAll(page) {
  return page.evaluate(() => {
    const bad = [];
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > width + 1) bad.push('page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + width);
    for (const el of document.querySelectorAll('body *')) {
      if (el.closest('script, style, noscript, template')) continue;
      const box = el.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;
      if (getComputedStyle(el).position === 'absolute' && el.classList.contains('visually-hidden')) continue;
      const name = `${el.tagName}.${el.className}#${el.id}`;
      if (box.right > width + 1) bad.push(`${name} ends at ${Math.round(box.right)} > ${width}`);
      if (box.left < -1) bad.push(`${name} starts at ${Math.round(box.left)} < 0`);
      const style = getComputedStyle(el);
      if (style.display !== 'inline' && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 && el.tagName !== 'PROGRESS') {
        bad.push(`${name} text ${el.scrollWidth} > box ${el.clientWidth}: "${el.textContent.trim().slice(0, 40)}"`);
      }
    }
    return bad;
  });
}

// buttonRows checks that buttons side by side (on one line: their boxes overlap vertically) are equally
// tall, whatever their kind (filled or outlined). Returns the offenders.
export async function buttonRows(page) {
  return page.evaluate(() => {
    const bad = [];
    const buttons = [...document.querySelectorAll('.button')].map((el) => ({ el, box: el.getBoundingClientRect() }))
      .filter((b) => b.box.width > 0 && b.box.height > 0);
    for (let i = 0; i < buttons.length; i++) {
      for (let j = i + 1; j < buttons.length; j++) {
        const [a, b] = [buttons[i], buttons[j]];
        if (a.box.top < b.box.bottom && b.box.top < a.box.bottom && Math.abs(a.box.height - b.box.height) > 0.5) {
          bad.push(`buttons in one row differ in height: "${a.el.textContent.trim()}" (${a.el.className}) ${a.box.height} px, "${b.el.textContent.trim()}" (${b.el.className}) ${b.box.height} px`);
        }
      }
    }
    return bad;
  });
}

// pixel is the colour at a point of an element as drawn (fx, fy: fractions of its box): the
// element's screenshot decoded by the page itself (the pages' CSP allows data: images).
export async function pixel(page, selector, fx, fy) {
  const png = await page.locator(selector).screenshot();
  return page.evaluate(async ([b64, x, y]) => {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(Math.floor(c.width * x), Math.floor(c.height * y), 1, 1).data;
    return `rgb(${d[0]}, ${d[1]}, ${d[2]})`;
  }, [png.toString('base64'), fx, fy]);
}
