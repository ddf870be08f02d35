/* edgeq waiting page: keeps the visitor's place up to date and takes them on when it is their turn.
 * Polls the status endpoint with jitter, slower while the tab is hidden, backing off on errors and
 * honouring Retry-After; when served, claims the token and continues to the return path. Before a
 * scheduled opening it counts down, and shows the opening in the visitor's own time zone with the
 * zone's name; both follow the opening the server reports (the operator may move it). The not-open
 * page, which has no place to poll, looks at the queue's schedule every 30 s or so (the page's own URL
 * asked for JSON: no place is taken) and reloads when joins start. When the queue changes phase (opens,
 * sells out) the page reloads, and the server renders the new phase (a sold-out page polls no more).
 * Without this script the page still works: it refreshes itself (meta refresh), shows the opening in
 * UTC, and the server sends the visitor on. */
(function () {
  'use strict';
  var lang = document.documentElement.lang;
  // Numbers and dates in the page's language, with the Latin digits the server writes in every
  // language (Arabic pages included), so a number never changes its digits when the script updates it.
  var locale = lang ? lang + '-u-nu-latn' : undefined;
  var numbers = null;
  try { numbers = new Intl.NumberFormat(locale, { maximumFractionDigits: 0 }); } catch (e) { numbers = null; }

  // number formats a count for people (1,234 / 1.234 / 1 234 as the language writes it).
  function number(n) {
    if (typeof n !== 'number' || !isFinite(n)) return String(n);
    return numbers ? numbers.format(n) : String(n);
  }

  function pad(n) { return (n < 10 ? '0' : '') + n; }

  function jitter(ms) { return Math.round(ms * (0.8 + Math.random() * 0.4)); }

  // Opening times in the visitor's own time zone, with the zone's name (EST, GMT+8, ...) in the page's
  // language: explicit fields, since timeZoneName cannot go with dateStyle/timeStyle. A browser that
  // cannot format the page's language gets what the page shows without script: the time in UTC
  // (2026-12-01 17:00 UTC, the same in every language).
  var clockFormat = null;
  (lang ? [locale, lang] : [undefined]).some(function (tag) {
    try {
      clockFormat = new Intl.DateTimeFormat(tag, {
        year: 'numeric', month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit', timeZoneName: 'short'
      });
      return true;
    } catch (e) {
      clockFormat = null;
      return false;
    }
  });

  function utcClock(at) {
    return at.getUTCFullYear() + '-' + pad(at.getUTCMonth() + 1) + '-' + pad(at.getUTCDate()) + ' ' +
      pad(at.getUTCHours()) + ':' + pad(at.getUTCMinutes()) + ' UTC';
  }

  function clockText(at) {
    if (clockFormat) {
      try { return clockFormat.format(at); } catch (e) { /* below */ }
    }
    return utcClock(at);
  }

  // showClocks writes every opening time (time.local-time) for the visitor; with opensAt (RFC 3339,
  // from the server) the opening moved there first, datetime attribute included.
  function showClocks(opensAt) {
    Array.prototype.forEach.call(document.querySelectorAll('time.local-time'), function (node) {
      if (opensAt && isFinite(Date.parse(opensAt)) && node.getAttribute('datetime') !== opensAt) node.setAttribute('datetime', opensAt);
      var at = new Date(node.getAttribute('datetime'));
      if (isNaN(at.getTime())) return;
      var shown = clockText(at);
      if (node.textContent !== shown) node.textContent = shown;
    });
  }
  showClocks();

  // countdown shows seconds left as [N d] hh:mm:ss (digits read the same in every language).
  function countdownText(seconds, text) {
    seconds = Math.max(0, Math.round(seconds));
    var d = Math.floor(seconds / 86400), h = Math.floor(seconds / 3600) % 24;
    var m = Math.floor(seconds / 60) % 60, s = seconds % 60;
    var clock = pad(h) + ':' + pad(m) + ':' + pad(s);
    return d > 0 ? (text.countdown_days || '%d d').replace('%d', number(d)) + ' ' + clock : clock;
  }

  var counters = [];
  function tick() {
    counters.forEach(function (c) {
      var v = countdownText((c.until - Date.now()) / 1000, c.text);
      if (c.node.textContent !== v) c.node.textContent = v;
    });
  }
  function startCountdowns(text) {
    Array.prototype.forEach.call(document.querySelectorAll('.countdown'), function (node) {
      counters.push({ node: node, until: Date.now() + Number(node.dataset.seconds || 0) * 1000, text: text });
    });
    tick();
    setInterval(tick, 1000);
  }

  // showOpening follows the opening the server reports now (opens_at, opens_in: the operator may have
  // moved it): the countdown and the shown time agree with it.
  function showOpening(opensAt, opensIn) {
    if (typeof opensIn === 'number') {
      counters.forEach(function (c) { c.until = Date.now() + opensIn * 1000; });
      tick();
    }
    if (opensAt) showClocks(opensAt);
  }

  function reloadSoon(url) {
    // Everyone waiting sees the same change at once: spread the reloads over a second and a half.
    setTimeout(function () { location.replace(url); }, Math.round(Math.random() * 1500));
  }

  var notOpen = document.getElementById('notopen');
  if (notOpen) {
    startCountdowns(JSON.parse(notOpen.dataset.text || '{}'));
    var selfURL = notOpen.dataset.self;
    var slow = Number(notOpen.dataset.poll) || 30000;
    var reloadTimer = null;
    var lookTimer = null;
    var reloadAt = function (joinsIn) {
      clearTimeout(reloadTimer);
      // At most what a timer holds (24.8 days): a longer one would fire at once. The looks move it.
      reloadTimer = setTimeout(function () { reloadSoon(selfURL); }, Math.min(0x7fffffff, Math.max(1000, joinsIn * 1000)));
    };
    // look asks for the queue's schedule (the page's URL, as JSON: no place is taken). A moved opening
    // is shown; when joins start (or the queue is no longer before its pre-queue) the page reloads.
    var look = function () {
      fetch(selfURL, { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } }).then(function (resp) {
        var retryAfter = Number(resp.headers.get('Retry-After')) || 0;
        return (resp.status === 200 ? resp.json() : Promise.resolve(null)).then(function (s) {
          if (s && s.state && s.state !== 'not_open') {
            clearTimeout(reloadTimer);
            reloadSoon(selfURL);
            return;
          }
          if (s) {
            showOpening(s.opens_at, s.opens_in);
            if (typeof s.joins_in === 'number') reloadAt(s.joins_in);
          }
          lookTimer = setTimeout(look, Math.max(jitter(slow), retryAfter * 1000));
        });
      }).catch(function () {
        clearTimeout(lookTimer);
        lookTimer = setTimeout(look, jitter(slow));
      });
    };
    reloadAt(Number(notOpen.dataset.joinsIn) || 0);
    if (window.fetch) lookTimer = setTimeout(look, jitter(slow));
    return;
  }

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

  var phase = cfg.phase || 'waiting';
  if (phase === 'prequeue') startCountdowns(text);

  var el = {
    paused: document.getElementById('paused'),
    position: document.getElementById('position'),
    ahead: document.getElementById('ahead'),
    eta: document.getElementById('eta'),
    progress: document.getElementById('progress'),
    updated: document.getElementById('updated'),
    notice: document.getElementById('notice'),
    refresh: document.getElementById('refresh'),
    announce: document.getElementById('announce')
  };

  function t(key, n) {
    var s = text[key] || '';
    return n === undefined ? s : s.replace('%d', number(n));
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
    // The notice is a live region: the same message again (a poll failing again) is left alone, not
    // read out once more.
    if (!action && el.notice.textContent === (message || '') && el.notice.hidden === !message) return;
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

  function delay() {
    var d = document.hidden ? hiddenPoll : poll;
    if (failures > 0) d = Math.max(d, poll * Math.pow(2, Math.min(failures, 5)));
    return jitter(Math.min(d, maxPoll));
  }

  function schedule(ms) {
    clearTimeout(timer);
    if (!finished) timer = setTimeout(check, ms);
  }

  // Announcements for screen readers (the polite live region #announce). The numbers on the page change
  // at every poll while the line moves; reading each change out would drown the visitor, so the region
  // is written only when the count ahead changed and the change means something: a quarter of the
  // line since the last announcement, the visitor's turn (0 ahead), or a minute since the last one.
  // A poll that finds the same count writes nothing.
  // (The server writes plain digits; grouping them comes later.)
  var lastSaid = { ahead: el.ahead ? Number(el.ahead.textContent.replace(/[^0-9]/g, '')) : NaN, at: Date.now() };

  function label(node) {
    var dt = node && node.parentNode && node.parentNode.querySelector('dt');
    return dt ? dt.textContent.trim() : '';
  }

  function say(message) {
    if (el.announce && el.announce.textContent !== message) el.announce.textContent = message;
  }

  function announceProgress(ahead, eta) {
    if (!el.ahead || typeof ahead !== 'number' || ahead === lastSaid.ahead) return;
    var moved = Math.abs(lastSaid.ahead - ahead);
    var now = Date.now();
    if (ahead !== 0 && !(moved >= lastSaid.ahead / 4) && now - lastSaid.at < 60000) return;
    lastSaid = { ahead: ahead, at: now };
    say(label(el.ahead) + ': ' + number(ahead) + '. ' + label(el.eta) + ': ' + eta + '.');
  }

  function setPaused(paused) {
    if (paused !== !!el.paused) say(paused ? t('paused') : '');
    if (paused && !el.paused) {
      el.paused = document.createElement('p');
      el.paused.className = 'notice';
      el.paused.id = 'paused';
      el.paused.textContent = t('paused');
      var lead = root.querySelector('.lead');
      if (lead && lead.parentNode) lead.parentNode.insertBefore(el.paused, lead.nextSibling);
    } else if (!paused && el.paused) {
      el.paused.parentNode.removeChild(el.paused);
      el.paused = null;
    }
  }

  function render(s) {
    updatedAt = Date.now();
    setPaused(!!s.paused);
    // The opening may have moved (the operator's schedule): the countdown and the shown time follow it.
    if (typeof s.opens_in === 'number') showOpening(s.opens_at, s.opens_in);
    setText(el.position, number(s.queue_position));
    setText(el.ahead, number(s.ahead));
    setText(el.eta, duration(s.estimated_wait_time));
    announceProgress(s.ahead, duration(s.estimated_wait_time));
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

  // beat tells edgeq what polls cannot: the page went into the background, where browsers slow its
  // timers to about one a minute or freeze them (edgeq then keeps the place for a longer grace), or it
  // is closing (the place goes to the next visitor within seconds, unless a page polls again, as a
  // reload does). sendBeacon is delivered even as the page unloads.
  function beat(page) {
    if (!cfg.beatUrl || !navigator.sendBeacon) return;
    try { navigator.sendBeacon(cfg.beatUrl, new URLSearchParams({ page: page })); } catch (e) { /* best effort */ }
  }

  function check() {
    var url = cfg.statusUrl + (document.hidden ? '?hidden=1' : '');
    request(url, { method: 'GET' }).then(function (r) {
      if (r.status === 200) {
        failures = 0;
        notice('');
        var st = r.body.queue_status;
        if (st === 'sold_out' || (phase === 'prequeue' && st !== 'prequeue') || (phase !== 'prequeue' && st === 'prequeue')) {
          // A new phase: the server renders its page (the sold-out one polls no more).
          finished = true;
          reloadSoon(cfg.self);
          return;
        }
        render(r.body);
        if (st === 'served') claim();
        else schedule(delay());
      } else if (r.status === 410) {
        expired();
      } else {
        failed(r.retryAfter);
      }
    }, function () { failed(0); });
  }

  // Closing fires pagehide and then visibilitychange (hidden): once gone, the page says nothing more.
  var gone = false;
  document.addEventListener('visibilitychange', function () {
    if (finished || gone) return;
    // Back in view: look again soon instead of at the slow hidden-tab pace.
    if (!document.hidden) schedule(jitter(500));
    else beat('hidden');
  });
  window.addEventListener('pagehide', function (e) {
    // Kept in the back-forward cache, the page may come back: it is only hidden.
    if (finished) return;
    gone = !e.persisted;
    beat(gone ? 'gone' : 'hidden');
  });
  window.addEventListener('pageshow', function (e) {
    // Back from the back-forward cache: look at once.
    if (e.persisted && !finished) {
      gone = false;
      schedule(jitter(500));
    }
  });
  if (el.refresh) {
    el.refresh.addEventListener('click', function (e) { e.preventDefault(); schedule(0); });
  }
  // The server wrote plain digits: group them as the language does at once, not at the first update.
  [el.position, el.ahead].forEach(function (node) {
    if (node && /^[0-9]+$/.test(node.textContent.trim())) setText(node, number(Number(node.textContent)));
  });
  setInterval(function () { setText(el.updated, since()); }, 1000);
  setText(el.updated, since());
  schedule(jitter(Math.min(poll, 2000)));
})();
