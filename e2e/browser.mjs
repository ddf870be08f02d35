// Browser scenarios of edgeq's pages, in headless Chromium through playwright-core. The Go test
// e2e_test.go starts the demo shop, edgeq and the Turnstile stand-in, then runs
//
//   node browser.mjs <scenario>
//
// with the addresses in the environment. A scenario throws (exit 1) on the first broken expectation.
// This file only maps a scenario's name to the module that plays it.
import { log } from './lib.mjs';
import { axeScenario, keyboard, liveregion, motion } from './a11y.mjs';
import { dashboard, deadletters, invite } from './dashboard.mjs';
import { drops } from './drops.mjs';
import { background, closed, drawnAndGone } from './noshows.mjs';
import { branding, overflowScenario, statesScenario } from './pages.mjs';
import { reportScenario } from './report.mjs';
import { bid, graphqlShop, onePerBrowser, overTLS, shop } from './shop.mjs';
import { nojs, screenshots, still, turnstile, waitroom, xss } from './waiting.mjs';

const scenarios = {
  waitroom, nojs, turnstile, screenshots, shop, graphqlShop, bid, still, xss, dashboard, report: reportScenario, drops, invite,
  deadletters,
  closed, drawnAndGone, background,
  onePerBrowser, overTLS,
  axe: axeScenario, keyboard, liveregion, motion, overflow: overflowScenario, states: statesScenario, branding,
};
const name = process.argv[2];
if (!scenarios[name]) {
  console.error('usage: node browser.mjs ' + Object.keys(scenarios).join('|'));
  process.exit(2);
}
scenarios[name]().then(() => log(name, 'ok'), (err) => { console.error('[e2e]', name, 'FAILED:', err.message); process.exit(1); });
