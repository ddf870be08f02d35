/* edgeq proof-of-work check: the page side of challenge.provider pow.
 *
 * Every .pow box (botcheck/pow.go draws it inside a form) asks edgeq for a challenge
 * (data-pow-url), hands it to a Web Worker (data-pow-worker, static/pow-worker.js) and, once the
 * worker has found a nonce, puts the challenge and the nonce in the form's two hidden fields.
 *
 * - The progress bar shows an estimate: the chance that a nonce has been found by now. It stays
 *   below 100 until the answer is in, then shows 100.
 * - The status line is a live region, so it changes only when the state does (working, done,
 *   failed): a screen reader hears each state once, never a running count.
 * - A form sent before the answer is in waits for it, and is sent as soon as it is there.
 * - A challenge lives for expires_in seconds: shortly before that, a new one is fetched and solved,
 *   so a visitor who waits a while before pressing the button still sends a valid answer. The
 *   renewal is quiet (the page goes on saying "done"); a form sent during it waits for the new
 *   answer, and the page then says it is working again.
 * - A challenge that cannot be fetched, or a worker that fails, shows data-pow-failed.
 *
 * Without JavaScript the box's <noscript> text says the check needs it. */
(function () {
  'use strict';

  // estimate is the percentage shown after `tried` nonces at `difficulty` bits: the chance of having
  // found one by now (each nonce succeeds with probability 2^-difficulty), rounded up so the bar moves
  // from the first report, and capped at 99.
  function estimate(tried, difficulty) {
    var p = 100 * (1 - Math.exp(-tried / Math.pow(2, difficulty)));
    return Math.max(0, Math.min(99, Math.ceil(p)));
  }

  // renewAt is when, counted from its issue, a challenge living lifeMs is replaced: a tenth of its life
  // (at most 15 s) before it expires, so the answer in the form is never one the server calls expired.
  function renewAt(lifeMs) {
    return Math.max(1000, lifeMs - Math.min(15000, lifeMs / 10));
  }

  function setup(box) {
    var url = box.getAttribute('data-pow-url');
    var workerURL = box.getAttribute('data-pow-worker');
    var challengeField = box.querySelector('input[name="pow_challenge"]');
    var nonceField = box.querySelector('input[name="pow_nonce"]');
    if (!url || !workerURL || !challengeField || !nonceField) return;
    var form = box.closest('form');
    var status = box.querySelector('.pow-status');
    var bar = box.querySelector('.pow-progress');
    var workingText = status ? status.textContent : '';

    var state = 'working'; // working, done or failed
    var quiet = false; // a renewal in the background: the page keeps saying "done"
    var percent = 0; // the estimate for the challenge being solved
    var round = 0; // counts challenges: the answer to an abandoned one is ignored
    var worker = null;
    var renewal = null; // the timer that fetches the next challenge
    var waiting = null; // a submit held until the answer is in: its submitter button, or true

    function say(text) {
      if (status && text && status.textContent !== text) status.textContent = text;
    }

    function show(value) {
      if (bar && bar.value !== value) bar.value = value;
    }

    function stop() {
      if (worker) {
        worker.terminate();
        worker = null;
      }
      clearTimeout(renewal);
      renewal = null;
    }

    function fail() {
      stop();
      state = 'failed';
      waiting = null;
      say(box.getAttribute('data-pow-failed'));
    }

    function finish(challenge, nonce) {
      if (worker) {
        worker.terminate();
        worker = null;
      }
      challengeField.value = challenge;
      nonceField.value = String(nonce);
      state = 'done';
      quiet = false;
      show(100);
      say(box.getAttribute('data-pow-done'));
      if (waiting && form) {
        var submitter = waiting;
        waiting = null;
        send(submitter);
      }
    }

    // send submits the form as the visitor meant to: through requestSubmit (validation, the submit
    // event, the button's name and value) where the browser has it.
    function send(submitter) {
      if (typeof form.requestSubmit === 'function') {
        var button = submitter && submitter.form === form ? submitter : undefined;
        form.requestSubmit(button);
      } else {
        form.submit();
      }
    }

    // solve fetches a challenge and has a worker solve it, from nothing. A renewal (background) is
    // quiet: the status and the bar go on saying "done" unless the visitor sends the form meanwhile.
    function solve(background) {
      stop();
      var mine = ++round;
      state = 'working';
      quiet = !!background;
      percent = 0;
      challengeField.value = '';
      nonceField.value = '';
      if (!quiet) {
        show(0);
        say(workingText);
      }
      var asked = Date.now();
      fetch(url, { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } })
        .then(function (resp) {
          if (!resp.ok) throw new Error('pow challenge: HTTP ' + resp.status);
          return resp.json();
        })
        .then(function (c) {
          if (mine !== round) return;
          if (!c || typeof c.challenge !== 'string' || typeof c.difficulty !== 'number') throw new Error('pow challenge: malformed');
          work(mine, c, asked);
        })
        .catch(function () {
          if (mine === round) fail();
        });
    }

    function work(mine, c, asked) {
      var life = (typeof c.expires_in === 'number' && c.expires_in > 0 ? c.expires_in : 120) * 1000;
      // Counted from when the challenge was asked for: the server's clock started before the answer.
      renewal = setTimeout(function () { solve(true); }, Math.max(1000, renewAt(life) - (Date.now() - asked)));
      try {
        worker = new Worker(workerURL);
      } catch (e) {
        fail();
        return;
      }
      worker.onmessage = function (ev) {
        if (mine !== round || !ev.data) return;
        if (ev.data.nonce !== undefined) {
          finish(c.challenge, ev.data.nonce);
        } else if (typeof ev.data.tried === 'number') {
          percent = estimate(ev.data.tried, c.difficulty);
          if (!quiet) show(percent);
        }
      };
      worker.onerror = function () {
        if (mine === round) fail();
      };
      worker.onmessageerror = worker.onerror;
      worker.postMessage({ challenge: c.challenge, difficulty: c.difficulty, start: 0, step: 1 });
    }

    if (form) {
      form.addEventListener('submit', function (ev) {
        if (state !== 'working') return; // done: the answer goes with it; failed: the server says so
        ev.preventDefault();
        waiting = ev.submitter || true;
        if (quiet) {
          // Sent during a renewal: the visitor now waits for it, and is told so.
          quiet = false;
          show(percent);
          say(workingText);
        }
      });
    }
    // A page restored from the back-forward cache holds an answer that was probably sent already.
    window.addEventListener('pageshow', function (ev) {
      if (ev.persisted) solve(false);
    });
    solve(false);
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll('.pow'), setup);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
