/* edgeq waiting page: keeps the visitor's place up to date and takes them on when it is their turn.
 * Polls the status endpoint with jitter, slower while the tab is hidden, backing off on errors and
 * honouring Retry-After; when served, claims the token and continues to the return path. Without this
 * script the page still works: it refreshes itself (meta refresh) and the server sends the visitor on. */
(function () {
  'use strict';
  var root = document.getElementById('wait');
  if (!root || !window.fetch) return;
  document.documentElement.classList.add('js');

  var cfg = root.dataset;
  var text = JSON.parse(cfg.text || '{}');
  var poll = Number(cfg.poll) || 4000;
  var hiddenPoll = Number(cfg.hiddenPoll) || 15000;
  var maxPoll = Number(cfg.maxPoll) || 30000;
  var updatedAt = Date.parse(cfg.updated) || Date.now();
  var failures = 0;
  var timer = null;
  var finished = false;

  var el = {
    position: document.getElementById('position'),
    ahead: document.getElementById('ahead'),
    eta: document.getElementById('eta'),
    progress: document.getElementById('progress'),
    updated: document.getElementById('updated'),
    notice: document.getElementById('notice'),
    refresh: document.getElementById('refresh')
  };

  function t(key, n) {
    var s = text[key] || '';
    return n === undefined ? s : s.replace('%d', String(n));
  }

  function duration(seconds) {
    if (seconds < 0) return t('eta_unknown');
    if (seconds === 0) return t('eta_now');
    if (seconds < 60) return t('under_min');
    if (seconds < 90) return t('one_min');
    if (seconds < 5400) return t('about_min', Math.round(seconds / 60));
    return t('about_hr', Math.round(seconds / 3600));
  }

  function setText(node, value) {
    if (node && node.textContent !== String(value)) node.textContent = String(value);
  }

  function notice(message, action) {
    if (!el.notice) return;
    el.notice.textContent = message || '';
    if (action) {
      var link = document.createElement('a');
      link.className = 'button';
      link.href = action.href;
      link.textContent = action.label;
      el.notice.appendChild(document.createTextNode(' '));
      el.notice.appendChild(link);
    }
    el.notice.hidden = !message;
  }

  function since() {
    var s = Math.max(0, Math.round((Date.now() - updatedAt) / 1000));
    if (s < 5) return t('just_now');
    if (s < 60) return t('seconds', s);
    return t('minutes', Math.floor(s / 60));
  }

  function jitter(ms) { return Math.round(ms * (0.8 + Math.random() * 0.4)); }

  function delay() {
    var d = document.hidden ? hiddenPoll : poll;
    if (failures > 0) d = Math.max(d, poll * Math.pow(2, Math.min(failures, 5)));
    return jitter(Math.min(d, maxPoll));
  }

  function schedule(ms) {
    clearTimeout(timer);
    if (!finished) timer = setTimeout(check, ms);
  }

  function render(s) {
    updatedAt = Date.now();
    setText(el.position, s.queue_position);
    setText(el.ahead, s.ahead);
    setText(el.eta, duration(s.estimated_wait_time));
    if (el.progress && s.queue_position > 0) {
      var pct = Math.max(0, Math.min(100, Math.round(100 * s.serving_position / s.queue_position)));
      el.progress.value = pct;
      el.progress.textContent = pct + '%';
    }
    setText(el.updated, since());
  }

  function expired() {
    finished = true;
    notice(t('expired'), { href: cfg.rejoin, label: t('rejoin') });
  }

  function failed(retryAfter) {
    failures++;
    notice(t('offline'));
    var d = delay();
    if (retryAfter > 0) d = Math.max(d, retryAfter * 1000);
    schedule(d);
  }

  function request(url, options) {
    options.credentials = 'same-origin';
    options.cache = 'no-store';
    options.headers = Object.assign({ Accept: 'application/json' }, options.headers || {});
    return fetch(url, options).then(function (resp) {
      return resp.json().catch(function () { return {}; }).then(function (body) {
        return { status: resp.status, body: body, retryAfter: Number(resp.headers.get('Retry-After')) || 0 };
      });
    });
  }

  function claim() {
    notice(t('served'));
    var body = 'queue_id=' + encodeURIComponent(cfg.queue) + '&request_id=' + encodeURIComponent(cfg.request);
    request(cfg.tokenUrl, {
      method: 'POST', body: body,
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' }
    }).then(function (r) {
      if (r.status === 200) {
        finished = true;
        location.replace(cfg.return);
      } else if (r.status === 410) {
        expired();
      } else if (r.status === 202) {
        schedule(jitter(poll));
      } else {
        failed(r.retryAfter);
      }
    }, function () { failed(0); });
  }

  function check() {
    request(cfg.statusUrl, { method: 'GET' }).then(function (r) {
      if (r.status === 200) {
        failures = 0;
        notice('');
        render(r.body);
        if (r.body.queue_status === 'served') claim();
        else schedule(delay());
      } else if (r.status === 410) {
        expired();
      } else {
        failed(r.retryAfter);
      }
    }, function () { failed(0); });
  }

  document.addEventListener('visibilitychange', function () {
    // Back in view: look again soon instead of at the slow hidden-tab pace.
    if (!document.hidden && !finished) schedule(jitter(500));
  });
  if (el.refresh) {
    el.refresh.addEventListener('click', function (e) { e.preventDefault(); schedule(0); });
  }
  setInterval(function () { setText(el.updated, since()); }, 1000);
  setText(el.updated, since());
  schedule(jitter(Math.min(poll, 2000)));
})();
