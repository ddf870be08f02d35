/* A stand-in for Cloudflare's Turnstile widget (api.js), for tests and the demo without internet.
 * It follows the documented client API: implicit rendering of .cf-turnstile elements (data-sitekey,
 * data-action, data-callback, data-error-callback, data-response-field-name), window.turnstile with
 * render, reset, getResponse and remove, and the ?onload= callback. Instead of Cloudflare's challenge it
 * shows a checkbox; ticking it asks the stand-in server for a token, which is written into the form's
 * cf-turnstile-response field. */
(function () {
  'use strict';
  var script = document.currentScript;
  var origin = new URL(script.src).origin;
  var params = new URL(script.src).searchParams;
  var widgets = [];

  function callbackOf(name) {
    return name && typeof window[name] === 'function' ? window[name] : null;
  }

  function render(container, options) {
    var el = typeof container === 'string' ? document.querySelector(container) : container;
    if (!el) return undefined;
    options = options || {};
    var sitekey = options.sitekey || el.getAttribute('data-sitekey') || '';
    var action = options.action || el.getAttribute('data-action') || '';
    var fieldName = options['response-field-name'] || el.getAttribute('data-response-field-name') || 'cf-turnstile-response';
    var onSuccess = options.callback || callbackOf(el.getAttribute('data-callback'));
    var onError = options['error-callback'] || callbackOf(el.getAttribute('data-error-callback'));
    var id = 'cf-chl-widget-' + widgets.length;

    var box = document.createElement('label');
    box.className = 'cf-turnstile-stand-in';
    box.id = id;
    var check = document.createElement('input');
    check.type = 'checkbox';
    check.setAttribute('data-testid', 'turnstile-checkbox');
    var text = document.createElement('span');
    text.textContent = ' I am human';
    box.appendChild(check);
    box.appendChild(text);
    el.appendChild(box);

    var input = document.createElement('input');
    input.type = 'hidden';
    input.name = fieldName;
    var form = el.closest('form');
    (form || el).appendChild(input);

    var widget = { id: id, el: el, input: input, check: check, text: text, response: '' };
    widgets.push(widget);

    function solve() {
      check.disabled = true;
      text.textContent = ' Verifying…';
      var body = new URLSearchParams({ sitekey: sitekey, action: action, hostname: location.hostname });
      fetch(origin + '/turnstile/v0/token', { method: 'POST', body: body })
        .then(function (resp) { return resp.json().then(function (b) { return { ok: resp.ok, body: b }; }); })
        .then(function (r) {
          if (!r.ok || !r.body.token) throw new Error('blocked');
          widget.response = r.body.token;
          input.value = r.body.token;
          text.textContent = ' Success!';
          box.setAttribute('data-state', 'solved');
          if (onSuccess) onSuccess(r.body.token);
        })
        .catch(function () {
          text.textContent = ' Verification failed';
          box.setAttribute('data-state', 'failed');
          check.checked = false;
          check.disabled = false;
          if (onError) onError('600010');
        });
    }
    check.addEventListener('change', function () { if (check.checked) solve(); });
    // Cloudflare's "always passes" keys solve without a click; the interactive key waits for one.
    if (sitekey === '1x00000000000000000000AA' || sitekey === '1x00000000000000000000BB') {
      check.checked = true;
      solve();
    }
    return id;
  }

  function find(id) {
    for (var i = 0; i < widgets.length; i++) {
      if (id === undefined || widgets[i].id === id) return widgets[i];
    }
    return null;
  }

  window.turnstile = {
    render: render,
    getResponse: function (id) { var w = find(id); return w ? w.response : undefined; },
    reset: function (id) {
      var w = find(id);
      if (!w) return;
      w.response = '';
      w.input.value = '';
      w.check.checked = false;
      w.check.disabled = false;
      w.text.textContent = ' I am human';
    },
    remove: function (id) { var w = find(id); if (w) { w.el.innerHTML = ''; w.input.remove(); } }
  };

  function renderAll() {
    if (params.get('render') === 'explicit') return;
    var els = document.querySelectorAll('.cf-turnstile');
    for (var i = 0; i < els.length; i++) render(els[i]);
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', renderAll);
  else renderAll();
  var onload = params.get('onload');
  if (onload && typeof window[onload] === 'function') window[onload]();
})();
