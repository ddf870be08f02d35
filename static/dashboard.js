// edgeq operator dashboard. Reads the admin API once a second (with the browser's Basic credentials,
// sent automatically for this origin), keeps five minutes of samples per queue, and draws them. Every
// value from the API is put in the page as text (textContent), never as markup.
//
// Every request goes to location.origin + path. A page opened with credentials in its address
// (http://user:key@host:9090/dashboard) has them in its base URL too, and fetch() refuses to build a
// request for a relative URL resolved against it ("Request cannot be constructed from a URL that
// includes credentials"); the origin never carries them, and the browser still sends the credentials
// it signed in with.
(function () {
  'use strict';

  const POLL_MS = 1000;
  const KEEP_MS = 5 * 60 * 1000;
  const RATE_WINDOW_MS = 15 * 1000; // arrivals and served per minute are both measured over this window
  const changeHeader = document.body.dataset.header; // proves a change comes from this page

  const history = new Map(); // queue id -> [{t, waiting, serving, assigned, active, capacity, arrivals, served}]
  const bidHistory = new Map(); // auction id -> [{t, total}]
  const cards = new Map(); // queue id -> card element
  let busy = false;

  const $ = (sel, root) => (root || document).querySelector(sel);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function fmt(n, digits) {
    if (n === null || n === undefined || !isFinite(n)) return '—';
    return Number(n).toLocaleString('en-US', { maximumFractionDigits: digits || 0 });
  }

  function duration(seconds) {
    if (!isFinite(seconds) || seconds < 0) return '—';
    seconds = Math.round(seconds);
    if (seconds < 60) return seconds + ' s';
    const m = Math.floor(seconds / 60), s = seconds % 60;
    if (m < 60) return m + ' min ' + String(s).padStart(2, '0') + ' s';
    return Math.floor(m / 60) + ' h ' + String(m % 60).padStart(2, '0') + ' min';
  }

  const api = (path) => location.origin + path;

  async function getJSON(path) {
    const resp = await fetch(api(path), { headers: { Accept: 'application/json' }, cache: 'no-store' });
    let body = null;
    try { body = await resp.json(); } catch (e) { /* not JSON */ }
    if (!resp.ok && !(path === '/readyz' && resp.status === 503)) {
      const err = new Error((body && body.message) || ('HTTP ' + resp.status));
      err.status = resp.status;
      throw err;
    }
    return body;
  }

  async function change(method, path, body, form) {
    const headers = { Accept: 'application/json' };
    headers[changeHeader] = '1';
    let payload;
    if (form) {
      headers['Content-Type'] = 'application/x-www-form-urlencoded';
      payload = new URLSearchParams(body).toString();
    } else {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    const resp = await fetch(api(path), { method, headers, body: payload, cache: 'no-store' });
    let json = null;
    try { json = await resp.json(); } catch (e) { /* not JSON */ }
    if (!resp.ok) throw new Error((json && (json.problems || json.message)) || ('HTTP ' + resp.status));
    return json;
  }

  // rate returns the change per minute of field over the last RATE_WINDOW_MS of samples; NaN until the
  // samples span the whole window (the page opened moments ago): a step of one or two seconds made a
  // minute's rate would show one visitor as sixty.
  function rate(samples, field) {
    const last = samples[samples.length - 1];
    for (let i = samples.length - 2; i >= 0; i--) {
      const first = samples[i];
      if (last.t - first.t >= RATE_WINDOW_MS) {
        return Math.max(0, (last[field] - first[field]) / ((last.t - first.t) / 60000));
      }
    }
    return NaN;
  }

  // perMinute writes a rate, or says it is still being measured.
  function perMinute(r) { return isFinite(r) ? fmt(r, 1) : 'measuring'; }

  function record(map, key, sample) {
    let list = map.get(key);
    if (!list) { list = []; map.set(key, list); }
    list.push(sample);
    while (list.length && sample.t - list[0].t > KEEP_MS) list.shift();
    return list;
  }

  // chart draws series (arrays of numbers, one per sample) as polylines scaled to the largest value.
  function chart(svg, samples, fields) {
    const W = 300, H = 80, pad = 4;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const ns = 'http://www.w3.org/2000/svg';
    let max = 0;
    for (const s of samples) for (const f of fields) if (isFinite(s[f])) max = Math.max(max, s[f]);
    const top = max > 0 ? max * 1.1 : 1;
    const t0 = samples.length ? samples[0].t : 0;
    const span = samples.length > 1 ? Math.max(samples[samples.length - 1].t - t0, 1) : 1;
    fields.forEach((f, i) => {
      const pts = [];
      for (const s of samples) {
        if (!isFinite(s[f])) continue;
        const x = samples.length > 1 ? ((s.t - t0) / span) * W : W;
        const y = H - pad - (s[f] / top) * (H - 2 * pad);
        pts.push(x.toFixed(1) + ',' + y.toFixed(1));
      }
      const line = document.createElementNS(ns, 'polyline');
      line.setAttribute('class', 's' + i);
      line.setAttribute('points', pts.join(' '));
      svg.appendChild(line);
    });
    const label = document.createElementNS(ns, 'text');
    label.setAttribute('x', '4');
    label.setAttribute('y', '11');
    label.textContent = 'max ' + fmt(max, 1);
    svg.appendChild(label);
    svg.dataset.points = String(samples.length);
  }

  function card(q) {
    let c = cards.get(q.queue_id);
    if (c) return c;
    c = $('#queue-card').content.firstElementChild.cloneNode(true);
    c.dataset.queue = q.queue_id;
    const form = $('[data-f="controls"]', c);
    const result = $('[data-f="result"]', c);
    const capacity = form.elements.capacity;
    capacity.addEventListener('input', () => { capacity.dataset.dirty = '1'; });
    const act = async (what) => {
      const id = c.dataset.queue;
      result.textContent = '…';
      try {
        if (what === 'increment') {
          const by = form.elements.increment.value;
          const r = await change('POST', '/api/queue/increment_serving_position', { queue_id: id, increment_by: by }, true);
          result.textContent = 'serving position now ' + fmt(r.serving_pos);
        } else if (what === 'capacity') {
          const r = await change('PUT', '/api/queue', { queue_id: id, capacity: Number(capacity.value) });
          delete capacity.dataset.dirty;
          result.textContent = 'capacity now ' + fmt(r.capacity);
        } else if (what === 'pause') {
          const paused = c.dataset.paused !== 'true';
          const r = await change('PUT', '/api/queue', { queue_id: id, paused });
          result.textContent = r.paused ? 'paused' : 'running';
        }
        poll();
      } catch (e) {
        result.textContent = 'refused: ' + e.message;
      }
    };
    form.addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-action]');
      if (b) act(b.dataset.action);
    });
    form.addEventListener('submit', (ev) => ev.preventDefault());
    const list = $('#queues');
    const empty = $('p.muted', list);
    if (empty) empty.remove();
    list.appendChild(c);
    cards.set(q.queue_id, c);
    return c;
  }

  function renderQueues(items, now) {
    const seen = new Set();
    for (const q of items) {
      seen.add(q.queue_id);
      const samples = record(history, q.queue_id, {
        t: now, waiting: q.waiting_num, serving: q.serving_pos, assigned: q.assigned_pos,
        active: q.active_num, capacity: q.capacity,
      });
      // Both rates from the same samples over the same window, so they can be compared.
      const arrivals = rate(samples, 'assigned');
      const served = rate(samples, 'serving');
      Object.assign(samples[samples.length - 1], { arrivals, served });
      const c = card(q);
      const set = (f, v) => { $('[data-f="' + f + '"]', c).textContent = v; };
      set('title', q.title);
      set('id', q.queue_id);
      const link = $('[data-f="report"]', c);
      link.href = 'report?queue=' + encodeURIComponent(q.queue_id);
      link.setAttribute('aria-label', 'Report after the drop of queue ' + q.queue_id);
      set('waiting', fmt(q.waiting_num));
      set('positions', fmt(q.serving_pos) + ' / ' + fmt(q.assigned_pos));
      set('inside', fmt(q.active_num) + ' / ' + fmt(q.capacity));
      set('arrivals', perMinute(arrivals));
      set('served', perMinute(served));
      // A queue that serves nobody now (paused, not open yet, sold out) has no ETA to show.
      const moving = !q.state || q.state === 'open' || q.state === 'closed';
      // Invitations: shown for queues that have some, or take only invited visitors.
      const inv = q.invites || { total: 0, used: 0, unused: 0 };
      $('[data-f="invites-row"]', c).hidden = !(inv.total > 0 || q.invite_only);
      set('invites', fmt(inv.used) + ' / ' + fmt(inv.unused) + (q.invite_only ? ' · invite only' : ''));
      set('eta', q.waiting_num === 0 ? '0 s' : (moving && q.serving_rate_per_second > 0 ? duration(q.waiting_num / q.serving_rate_per_second) : '—'));
      const state = $('[data-f="state"]', c);
      const named = { open: 'running', paused: 'paused', not_open: 'not open yet', prequeue: 'pre-queue', sold_out: 'sold out', closed: 'closed' };
      const current = q.state || (q.paused ? 'paused' : 'open');
      let label = named[current] || current;
      if (q.method && q.method !== 'fifo') label += ' · ' + q.method;
      if (q.opens_at && (current === 'not_open' || current === 'prequeue')) label += ' · opens ' + new Date(q.opens_at).toLocaleString();
      state.textContent = label;
      state.dataset.state = current === 'open' ? 'running' : (current === 'sold_out' || current === 'closed' ? 'bad' : 'paused');
      c.dataset.paused = String(!!q.paused);
      $('button[data-action="pause"]', c).textContent = q.paused ? 'Resume' : 'Pause';
      const capacity = $('[data-f="controls"]', c).elements.capacity;
      if (!capacity.dataset.dirty && document.activeElement !== capacity) capacity.value = q.capacity;
      chart($('[data-chart="waiting"]', c), samples, ['waiting']);
      chart($('[data-chart="positions"]', c), samples, ['serving', 'assigned']);
      chart($('[data-chart="active"]', c), samples, ['active', 'capacity']);
      chart($('[data-chart="rates"]', c), samples, ['arrivals', 'served']);
    }
    for (const [id, c] of cards) {
      if (!seen.has(id)) { c.remove(); cards.delete(id); history.delete(id); }
    }
  }

  function fillTable(id, rows, columns) {
    const body = $('#' + id + ' tbody');
    const fresh = document.createElement('tbody');
    if (!rows.length) {
      const td = el('td', 'None.', 'muted');
      td.colSpan = columns;
      fresh.appendChild(el('tr')).appendChild(td);
    }
    for (const cells of rows) {
      const tr = el('tr');
      for (const cell of cells) {
        if (cell instanceof Node) tr.appendChild(el('td')).appendChild(cell);
        else tr.appendChild(el('td', cell));
      }
      fresh.appendChild(tr);
    }
    body.replaceWith(fresh);
  }

  function renderProducts(items) {
    fillTable('products', items.map((p) => {
      const sold = Math.max(0, p.total_stock - p.remaining_stock);
      const bar = el('div', undefined, 'bar');
      const fill = bar.appendChild(el('span'));
      fill.style.width = (p.total_stock > 0 ? (100 * p.remaining_stock) / p.total_stock : 0).toFixed(1) + '%';
      bar.title = fmt(p.remaining_stock) + ' of ' + fmt(p.total_stock) + ' left';
      return [p.name ? p.name + ' (' + p.id + ')' : p.id, fmt(p.remaining_stock), fmt(sold), bar];
    }), 4);
  }

  function renderAuctions(items, now) {
    fillTable('auctions', items.map((a) => {
      const samples = record(bidHistory, a.id, { t: now, total: a.total_bids });
      const h = a.highest_bid;
      return [a.id, h ? h.amount : '— (from ' + a.starting_price + ')', fmt(a.total_bids),
        perMinute(rate(samples, 'total')), a.ended ? 'ended' : new Date(a.ends_at).toLocaleString()];
    }), 5);
  }

  function renderAdmissions(items) {
    fillTable('admissions', items.map((a) => [a.id, a.product_id, fmt(a.quantity), a.state,
      new Date(a.admitted_at).toLocaleTimeString()]), 5);
  }

  function renderDeadLetters(items) {
    fillTable('dead-letters', items.map((d) => {
      const actions = el('span', undefined, 'actions');
      for (const [action, label] of [['retry', 'Retry'], ['dismiss', 'Dismiss']]) {
        const b = actions.appendChild(el('button', label));
        b.type = 'button';
        b.dataset.action = action;
        b.dataset.id = d.id;
      }
      return [d.id, d.type, d.product_id || d.auction_id || '', d.error || '', d.failed_at ? new Date(d.failed_at).toLocaleString() : '', actions];
    }), 6);
  }

  // Retry and dismiss, for every row the table is drawn with (event delegation: rows are redrawn).
  $('#dead-letters').addEventListener('click', async (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b) return;
    const out = $('#dead-result');
    const id = b.dataset.id;
    b.disabled = true;
    try {
      if (b.dataset.action === 'retry') {
        await change('POST', '/api/dead-letters/' + encodeURIComponent(id) + '/retry', {});
        out.textContent = id + ' retried: applied';
      } else {
        if (!confirm('Dismiss ' + id + '? It is removed for good (the log keeps what it was).')) return;
        await change('DELETE', '/api/dead-letters/' + encodeURIComponent(id));
        out.textContent = id + ' dismissed';
      }
      poll();
    } catch (e) {
      out.textContent = id + ': ' + e.message;
    } finally {
      b.disabled = false;
    }
  });

  function renderStore(ready) {
    const badge = $('#store');
    const store = ready && ready.checks ? ready.checks.store : undefined;
    const ok = store === 'ok';
    badge.textContent = 'store: ' + (ok ? 'ok' : (store ? 'unreachable' : 'unknown'));
    badge.dataset.state = ok ? 'ok' : 'bad';
    badge.title = store || '';
  }

  async function poll() {
    if (busy) return;
    busy = true;
    const errorBox = $('#error');
    try {
      // Each part is drawn from what answered; the rest keeps its last picture (during a store outage
      // the queue counters still come from the replica's snapshot while product reads fail).
      const parts = await Promise.allSettled([
        getJSON('/api/queues'), getJSON('/api/products'), getJSON('/api/auctions'),
        getJSON('/api/admissions?page_size=8'), getJSON('/readyz'), getJSON('/api/dead-letters?page_size=20'),
        getJSON('/api/admissions?state=admitted&older_than=300&page_size=1'),
      ]);
      const [queues, products, auctions, admissions, ready, dead, unsettled] = parts.map((p) => (p.status === 'fulfilled' ? p.value : null));
      const failed = parts.find((p) => p.status === 'rejected');
      const now = Date.now();
      if (queues) renderQueues(queues.items || [], now);
      if (products) renderProducts(products.items || []);
      if (auctions) renderAuctions(auctions.items || [], now);
      if (admissions) renderAdmissions(admissions.items || []);
      if (dead) renderDeadLetters(dead.items || []);
      if (unsettled) {
        const badge = $('#unsettled');
        badge.textContent = 'unsettled: ' + fmt(unsettled.total_count);
        badge.dataset.state = unsettled.total_count > 0 ? 'bad' : 'ok';
        const orphans = unsettled.orphans || { held: 0, released: 0 };
        const ob = $('#orphans');
        ob.textContent = 'orphans: ' + fmt(orphans.held) + ' held, ' + fmt(orphans.released) + ' released';
        ob.dataset.state = orphans.held > 0 && unsettled.total_count > 0 ? 'bad' : 'ok';
      }
      renderStore(ready);
      if (failed) throw failed.reason;
      $('#updated').textContent = 'updated ' + new Date(now).toLocaleTimeString();
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
      errorBox.hidden = true;
    } catch (e) {
      errorBox.hidden = false;
      errorBox.textContent = e.status === 401
        ? 'The admin key was refused: reload the page to sign in again.'
        : 'Cannot read the admin API: ' + e.message + ' (retrying)';
    } finally {
      busy = false;
    }
  }

  poll();
  setInterval(poll, POLL_MS);
})();
