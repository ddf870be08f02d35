// powtimes measures what edgeq's proof of work costs both sides, to choose its difficulty:
//
//   node e2e/powtimes.mjs --difficulties 12,14,16,18,20 --runs 15
//
// The shopper's side: headless Chromium loads a small page that starts static/pow-worker.js as
// edgeq's page does (one `new Worker(url)`, one postMessage) and times postMessage to the {nonce}
// answer, for fresh random 64-character challenges. Each difficulty's challenges are solved at
// every CPU slowdown (--rates), so the ratios between slowdowns compare the same work.
//
// Slowing a worker: Chromium refuses Emulation.setCPUThrottlingRate on a worker target ("Operation
// is only supported for pages, not workers"; the tool asks and prints the answer), and the page's
// throttle leaves the worker thread at full speed. So the tool throttles the page's renderer process
// itself, as DevTools does a page's thread: it reads the CPU time of the process's threads (Linux
// /proc) and stops the process (SIGSTOP, then SIGCONT) whenever a thread is ahead of 1/rate of the
// wall time. The worker, a thread of that process, then runs `rate` times slower, like a slower phone.
// A cgroup CPU quota was tried first: with a 4 ms scheduler tick it overran its quota, x6 gave x4.9.
//
// The bot's side: Go's benchmarks of internal/pow give the native cost of a nonce, from which the
// CPU seconds and the cloud price of 1,000 places follow (a place costs 2^d hashes on average).
// Progress goes to stderr; the markdown table to stdout.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({ options: {
  difficulties: { type: 'string', default: '12,14,16,18,20' },
  runs: { type: 'string', default: '15' },
  rates: { type: 'string', default: '1,4,6' },
  price: { type: 'string', default: '0.04' }, // dollars per vCPU-hour
  'max-run': { type: 'string', default: '60' }, // seconds; a slower run ends its cell early
} });
const numbers = (s) => s.split(',').map(Number);
const difficulties = numbers(opt.difficulties);
const rates = [...new Set(numbers(opt.rates))].sort((a, b) => a - b);
const runs = Number(opt.runs), price = Number(opt.price), maxRun = Number(opt['max-run']);
if (![...difficulties, ...rates, runs, price, maxRun].every((n) => Number.isFinite(n) && n >= 0) || !rates.includes(1)) {
  throw new Error('usage: powtimes.mjs [--difficulties 12,14,...] [--runs N] [--rates 1,4,6] [--price USD] [--max-run S]; --rates must include 1');
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const log = (...args) => console.error('[powtimes]', ...args);

// challenge returns a random string shaped like edgeq's: 40 characters, a dot, 23 (64 in all).
function challenge() {
  return randomBytes(30).toString('base64url') + '.' + randomBytes(17).toString('base64url'); // 40 + 1 + 23
}

// check fails loudly unless SHA-256(challenge || nonce) has at least difficulty leading zero bits.
function check(c, nonce, difficulty) {
  const sum = createHash('sha256').update(c + nonce).digest();
  let bits = 0;
  for (const byte of sum) {
    if (byte !== 0) { bits += Math.clz32(byte) - 24; break; }
    bits += 8;
  }
  if (!/^[0-9]{1,20}$/.test(nonce) || bits < difficulty) {
    throw new Error(`the worker's nonce ${nonce} for ${c} has ${bits} zero bits, not ${difficulty}`);
  }
}

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(q * xs.length) - 1)]; // nearest rank
const median = (xs) => quantile(xs, 0.5);

// goNanos runs internal/pow's benchmarks: Hash (one whole SHA-256 of challenge and nonce, as the
// server checks) and Solve16 (the bot's loop: one block per nonce from the challenge's midstate,
// 2^16 nonces per solve on average).
function goNanos() {
  const bench = (name, times) => {
    const out = execFileSync('go', ['test', '-run', '^$', '-bench', `^${name}$`, '-benchtime', times, './internal/pow/'],
      { cwd: root, encoding: 'utf8' });
    const m = out.match(new RegExp(`${name}\\S*\\s+\\d+\\s+([0-9.]+) ns/op`));
    if (!m) throw new Error(`no ns/op for ${name} in:\n${out}`);
    return Number(m[1]);
  };
  return { hash: bench('BenchmarkHash', '2000000x'), nonce: bench('BenchmarkSolve16', '1000x') / 2 ** 16 };
}

// renderers lists the pids of the renderer processes of the Chromium using profile. (Chromium's
// child processes rewrite their command line as one string, so it is split on spaces too.)
function renderers(profile) {
  return readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p)).map(Number).filter((pid) => {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split(/[\0 ]/);
      return args.includes('--type=renderer') && args.includes(`--user-data-dir=${profile}`);
    } catch { return false; } // gone meanwhile
  });
}

// threads returns the CPU time so far (ns) of each thread of pid, by thread id.
function threads(pid) {
  const times = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try { times.set(tid, Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])); } catch {} // ended
  }
  return times;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// throttled runs fn with process pid slowed rate times, like DevTools' CPU throttling of a page's
// thread but for all its threads: whenever one of them has used more than 1/rate of the wall time
// since the start, it stops the process (SIGSTOP) until the wall time catches up (SIGCONT). (The
// process's total would count the worker's start-up helpers, which run in parallel, against it.)
// Idle time earns at most `credit` ms of unthrottled running. It returns fn's result and the wall
// time per CPU time of the busiest thread, the slowdown achieved (about rate; at x1 a little over 1).
async function throttled(pid, rate, fn) {
  const credit = 2;
  const base = threads(pid), used = new Map(); // CPU ns since the start, by thread
  const busiest = () => Math.max(0, ...used.values()) / 1e6; // ms
  const t0 = performance.now();
  let start = t0, done = false;
  const loop = (async () => {
    while (!done) {
      for (const [tid, ns] of threads(pid)) used.set(tid, ns - (base.get(tid) ?? 0)); // a new thread counts from 0
      const wall = performance.now() - start, owed = busiest() * rate;
      if (wall - owed > credit) start += wall - owed - credit;
      if (rate > 1 && owed > wall) {
        process.kill(pid, 'SIGSTOP');
        await sleep(owed - wall);
        process.kill(pid, 'SIGCONT');
      } else {
        await sleep(1);
      }
    }
  })();
  let result;
  try {
    result = await fn();
  } finally {
    done = true;
    await loop;
    process.kill(pid, 'SIGCONT');
  }
  return { result, slowdown: (performance.now() - t0) / busiest() };
}

// pageRenderer starts a worker in the tab and returns the pid of the renderer that runs it.
async function pageRenderer(profile, tab) {
  await tab.evaluate(() => { window.probe = new Worker('/pow-worker.js'); });
  try {
    for (let i = 0; i < 100; i++, await sleep(50)) {
      const found = renderers(profile).filter((pid) => [...threads(pid).keys()].some((tid) => {
        try { return readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').startsWith('DedicatedWorker'); } catch { return false; }
      }));
      if (found.length === 1) return found[0];
    }
    throw new Error('no renderer with a DedicatedWorker thread found');
  } finally {
    await tab.evaluate(() => window.probe.terminate());
  }
}

// The page: solve() starts a worker as edgeq's waiting page does and times it.
const page = `<!doctype html><title>powtimes</title><script>
function solve(challenge, difficulty) {
  return new Promise((resolve, reject) => {
    const worker = new Worker('/pow-worker.js');
    worker.onerror = (e) => reject(new Error(e.message));
    worker.onmessage = (e) => {
      if (e.data.nonce === undefined) return; // progress
      const seconds = (performance.now() - start) / 1000;
      worker.terminate();
      resolve({ nonce: e.data.nonce, seconds });
    };
    const start = performance.now();
    worker.postMessage({ challenge, difficulty, start: 0, step: 1 });
  });
}
</script>`;
const workerScript = readFileSync(join(root, 'static', 'pow-worker.js'));
const server = createServer((req, res) => {
  const js = req.url === '/pow-worker.js';
  res.writeHead(200, { 'Content-Type': js ? 'text/javascript' : 'text/html', 'Cache-Control': 'no-store' });
  res.end(js ? workerScript : page);
});

// probeWorkerThrottle asks Chromium, over the page's DevTools session, to throttle a worker, and
// returns its answer.
async function probeWorkerThrottle(context, tab) {
  const cdp = await context.newCDPSession(tab);
  // Without flatten, a child session's messages travel inside Target.sendMessageToTarget.
  const send = (sessionId, id, method, params) => cdp.send('Target.sendMessageToTarget',
    { sessionId, message: JSON.stringify({ id, method, params }) }).catch(() => {});
  const answer = new Promise((resolve) => {
    cdp.on('Target.receivedMessageFromTarget', ({ sessionId, message }) => {
      const m = JSON.parse(message);
      if (m.id !== 1) return;
      resolve(m.error ? `refused: ${m.error.message}` : 'accepted');
      send(sessionId, 2, 'Runtime.runIfWaitingForDebugger', {});
    });
  });
  cdp.on('Target.attachedToTarget', ({ sessionId, targetInfo }) => {
    if (targetInfo.type === 'worker') send(sessionId, 1, 'Emulation.setCPUThrottlingRate', { rate: 4 });
  });
  await cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: true, flatten: false });
  await tab.evaluate(() => { window.probe = new Worker('/pow-worker.js'); });
  const result = await answer;
  await cdp.send('Target.setAutoAttach', { autoAttach: false, waitForDebuggerOnStart: false });
  await tab.evaluate(() => window.probe.terminate());
  await cdp.detach();
  return result;
}

// Ctrl-C ends the measurement after the current run, so Chromium is closed and its profile removed.
let interrupted = false;
process.once('SIGINT', () => { interrupted = true; log('interrupted: stopping after this run'); });

const fmt = (s) => (s < 0.1 ? s.toFixed(3) : s.toFixed(2));
const money = (x) => '$' + (x >= 0.01 ? x.toFixed(2) : x.toPrecision(2));

async function main() {
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
  if (Number(load) > cpus().length / 4) log(`load average ${load}: other work on this machine will skew the times`);
  log('Go benchmarks of internal/pow ...');
  const ns = goNanos();
  log(`pow.Hash ${ns.hash} ns a call; pow.Solve ${ns.nonce.toFixed(1)} ns a nonce`);

  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}/`;
  const profile = mkdtempSync(join(tmpdir(), 'edgeq-powtimes-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const results = new Map(rates.flatMap((r) => difficulties.map((d) => [`${d} ${r}`, []]))); // -> [{nonce, seconds, slowdown}]
  let version, probe;
  try {
    const tab = context.pages()[0] || await context.newPage();
    await tab.goto(base);
    const cdp = await context.newCDPSession(tab);
    version = (await cdp.send('Browser.getVersion')).product.replace(/^(Headless)?Chrome\//, 'Chromium ');
    await cdp.detach();
    probe = await probeWorkerThrottle(context, tab);
    log(`${version}; Emulation.setCPUThrottlingRate on a worker target: ${probe}`);
    const pid = await pageRenderer(profile, tab);
    for (const d of [12, 16]) await tab.evaluate((d) => solve('w'.repeat(64), d), d); // warms the caches, not counted

    // Each challenge is solved at every rate in turn, so no rate is favoured by warm-up or drift.
    for (const d of difficulties) {
      const active = new Set(rates);
      for (const [i, c] of Array.from({ length: runs }, challenge).entries()) {
        for (const rate of active) {
          const { result: { nonce, seconds }, slowdown } =
            await throttled(pid, rate, () => tab.evaluate(([c, d]) => solve(c, d), [c, d]));
          check(c, nonce, d);
          const first = results.get(`${d} 1`)[i];
          if (first && first.nonce !== nonce) throw new Error(`${c}: nonce ${nonce} at x${rate}, ${first.nonce} at x1`);
          results.get(`${d} ${rate}`).push({ nonce, seconds, slowdown });
          log(`difficulty ${d} run ${i + 1}/${runs} x${rate}: ${fmt(seconds)} s (nonce ${nonce}, slowdown ${slowdown.toFixed(2)})`);
          if (interrupted) throw new Error('interrupted');
          if (seconds > maxRun) { // slower rates would take longer still
            log(`over ${maxRun} s: no more runs at x${rate} or slower for difficulty ${d}`);
            for (const r of active) if (r >= rate) active.delete(r);
          }
        }
      }
    }
  } finally {
    await context.close();
    server.close();
    rmSync(profile, { recursive: true, force: true });
  }

  const seconds = (d, rate) => results.get(`${d} ${rate}`).map((r) => r.seconds);
  const row = (cells) => `| ${cells.join(' | ')} |`;
  const table = (head, rows) => [row(head), row(head.map(() => '---')), ...rows.map(row)].join('\n');
  const slow = rates.filter((r) => r !== 1), slowest = rates[rates.length - 1];
  const fits = difficulties.filter((d) => median(seconds(d, slowest)) < 3);
  console.log(`Machine: ${cpus()[0]?.model.trim()}, ${cpus().length} vCPUs (load average ${load} at the start); ${version}; \
Node ${process.version}; ${new Date().toISOString().slice(0, 10)}.
Native Go: pow.Hash ${ns.hash} ns a call, pow.Solve ${ns.nonce.toFixed(1)} ns a nonce (used below); $${price} per vCPU-hour.
${runs} random challenges per difficulty, the same ones at every slowdown; times from postMessage to the nonce.
Slowdown by stopping the page's renderer process (DevTools on a worker target: ${probe}).
`);
  console.log(table(['difficulty', 'expected hashes', ...rates.map((r) => `${r === 1 ? 'Chromium ' : ''}x${r} median / p90`),
    'bot (native Go) CPU-seconds per 1,000 places', 'cost per 1,000 places'], difficulties.map((d) => {
    const cpuSeconds = 1000 * 2 ** d * ns.nonce * 1e-9;
    return [d, (2 ** d).toLocaleString('en-US'), ...rates.map((rate) => {
      const times = seconds(d, rate);
      return `${fmt(median(times))} / ${fmt(quantile(times, 0.9))} s${times.length < runs ? ` (${times.length} runs)` : ''}`;
    }), cpuSeconds.toPrecision(3), money(cpuSeconds / 3600 * price)];
  })));
  // The throttle check: each slowdown's median over x1's, and the slowdown the throttle achieved.
  console.log('\nThrottle check: medians over the x1 median; achieved = wall time per CPU time of the busiest renderer thread (median).\n');
  console.log(table(['difficulty', ...slow.map((r) => `x${r} / x1 median`), ...rates.map((r) => `x${r} achieved`)],
    difficulties.map((d) => [d, ...slow.map((r) => (median(seconds(d, r)) / median(seconds(d, 1))).toFixed(2)),
      ...rates.map((r) => median(results.get(`${d} ${r}`).map((x) => x.slowdown)).toFixed(2))])));
  console.log(`\nLargest difficulty whose x${slowest} median is under 3 s: ${fits.length ? Math.max(...fits) : 'none'}.`);
}

main().catch((e) => { console.error(e); process.exit(1); });
