// The report after a drop, in the admin listener and as the file `edgeq report -out` writes.
import { env, expect, log, screenshot } from './lib.mjs';
import { runAxe } from './checks.mjs';
import { browser, desktop, phone, queueCard, text } from './common.mjs';

// report: the report after the drop e2e_test.go plays on queue "after" (product cap sells out). It signs in like the dashboard and is
// linked from each queue's card; the headline and every chart are drawn; axe-core finds nothing at
// desktop (1280 px) and phone (390 px) sizes; every table fits a desktop whole, and on a phone ends
// within the viewport unless its own box scrolls; nothing but the products table (which scrolls in its
// own box) is wider than a phone; the CSV is behind its link; printing leaves out the form. Then the file
// `edgeq report -out` wrote (REPORT_FILE) is opened with every request but the file's own refused: all
// charts are drawn from the file alone.
export async function reportScenario() {
  const bare = await fetch(env.EDGEQ_ADMIN_URL + '/report?queue=after');
  expect(bare.status === 401 && /^Basic /.test(bare.headers.get('www-authenticate') || ''),
    'report without the key: ' + bare.status + ' ' + bare.headers.get('www-authenticate'));
  const credentials = { username: 'operator', password: env.EDGEQ_ADMIN_KEY };
  const checkPage = async (page, what) => {
    const headline = await text(page, '.headline');
    expect(/\d+ joined, \d+ served/.test(headline) && /cap sold 40 units/.test(headline) && /sold out/.test(headline) && /left before their turn/.test(headline), what + ': headline ' + headline);
    const charts = await page.locator('figure svg').count();
    expect(charts >= 5, what + ': ' + charts + ' charts');
    const lines = await page.locator('figure svg polyline').count();
    expect(lines >= 4, what + ': ' + lines + ' lines drawn');
    const arrivals = await page.locator('svg[aria-labelledby^="arrivals"] polyline').first().getAttribute('points');
    expect(arrivals && arrivals.split(' ').length >= 2, what + ': arrivals line ' + arrivals);
    const axe = await runAxe(page);
    expect(axe.violations.length === 0, what + ': axe ' + JSON.stringify(axe.violations));
    return headline;
  };
  // tablesFit checks every table: no cell ends right of its box or the viewport unless the box scrolls
  // sideways (the cell is then reached by scrolling the box, never the page); without scrolls the box
  // may not scroll at all.
  const tablesFit = async (page, what, scrolls) => {
    const bad = await page.evaluate((scrolls) => {
      const out = [];
      const width = document.documentElement.clientWidth;
      const tables = document.querySelectorAll('table');
      if (tables.length === 0) out.push('no table');
      for (const table of tables) {
        const box = table.closest('.scroll') || table.parentElement;
        const edge = Math.min(box.getBoundingClientRect().right, width);
        if (box.getBoundingClientRect().right > width + 1) out.push(`the table's box ends at ${Math.round(box.getBoundingClientRect().right)} > ${width}`);
        const scrolling = ['auto', 'scroll'].includes(getComputedStyle(box).overflowX) && box.scrollWidth > box.clientWidth + 1;
        if (scrolling && !scrolls) out.push(`the table scrolls in its box: ${box.scrollWidth} > ${box.clientWidth}`);
        for (const cell of table.querySelectorAll('th, td')) {
          const right = cell.getBoundingClientRect().right;
          if (right > edge + 1 && !scrolling) out.push(`"${cell.textContent.trim().slice(0, 30)}" ends at ${Math.round(right)} > ${Math.round(edge)}`);
        }
      }
      return out;
    }, scrolls);
    expect(bad.length === 0, what + ': a table is cut off: ' + bad.join('; '));
  };

  const b = await browser({ ...desktop, httpCredentials: credentials });
  try {
    const { page } = b;
    await page.goto(env.EDGEQ_ADMIN_URL + '/dashboard');
    const card = await queueCard(page, 'after');
    await card.waitFor({ timeout: 15000 });
    const link = card.locator('[data-f="report"]');
    expect((await link.getAttribute('aria-label')) === 'Report after the drop of queue after', 'report link label');
    await Promise.all([page.waitForURL(/\/report\?queue=after$/), link.click()]);
    const headline = await checkPage(page, 'desktop');
    await tablesFit(page, 'desktop', false);
    log('headline', headline);
    await screenshot(page, 'report');
    const csv = await page.getAttribute('a[href*="format=csv"]', 'href');
    const answer = await page.context().request.get(new URL(csv, page.url()).href);
    const body = await answer.text();
    expect(answer.status() === 200 && /^text\/csv/.test(answer.headers()['content-type']) && body.startsWith('minute,joined,served,'),
      'csv: ' + answer.status() + ' ' + answer.headers()['content-type'] + ' ' + body.slice(0, 80));
    expect(body.trim().split('\n').length >= 2, 'csv has no rows');
    await page.emulateMedia({ media: 'print' });
    expect(await page.isHidden('form'), 'the form is printed');
    // Printed (to PDF, as the print dialog would): the charts are there, in pages of A4.
    const pdf = await page.pdf({ format: 'A4', printBackground: false });
    const pages = (pdf.toString('latin1').match(/\/Type\s*\/Page[^s]/g) || []).length;
    expect(pdf.length > 20000 && pages >= 1 && pages <= 6, 'the printed report: ' + pdf.length + ' bytes, ' + pages + ' pages');
    log('printed', pages, 'pages of A4');
    expect(b.dialogs.length === 0 && b.consoleErrors.length === 0, 'dialogs/errors: ' + b.dialogs + b.consoleErrors);
  } finally {
    await b.close();
  }

  const p = await browser({ ...phone, httpCredentials: credentials });
  try {
    const resp = await p.page.goto(env.EDGEQ_ADMIN_URL + '/report?queue=after');
    expect(resp.status() === 200, 'report on a phone: ' + resp.status());
    await checkPage(p.page, 'phone');
    await tablesFit(p.page, 'phone', true);
    const wide = await p.page.evaluate(() => {
      const bad = [];
      const width = document.documentElement.clientWidth;
      if (document.documentElement.scrollWidth > width + 1) bad.push('page scrolls sideways: ' + document.documentElement.scrollWidth);
      for (const el of document.querySelectorAll('main *')) {
        if (el.closest('.scroll')) continue; // the products table scrolls in its own box
        const box = el.getBoundingClientRect();
        if (box.right > width + 1) bad.push(`${el.tagName}.${el.className.baseVal ?? el.className} ends at ${Math.round(box.right)}`);
      }
      return bad;
    });
    expect(wide.length === 0, 'wider than the phone: ' + wide.join('; '));
    await screenshot(p.page, 'report-phone');
  } finally {
    await p.close();
  }

  if (!env.REPORT_FILE) return;
  const f = await browser(desktop);
  try {
    const refused = [];
    await f.page.route('**/*', (route) => {
      if (route.request().url().startsWith('file:')) return route.continue();
      refused.push(route.request().url());
      return route.abort();
    });
    await f.page.goto('file://' + env.REPORT_FILE);
    await checkPage(f.page, 'the file');
    await tablesFit(f.page, 'the file', false);
    expect(await f.page.isHidden('form'), 'the file has the form that needs the admin listener');
    expect(refused.length === 0, 'the file asked for ' + refused.join(', '));
  } finally {
    await f.close();
  }
}
