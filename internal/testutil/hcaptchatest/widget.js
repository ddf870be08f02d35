/* A stand-in for hCaptcha's widget script (js.hcaptcha.com/1/api.js), for tests and demos without
 * the internet. It keeps to the documented client API: every .h-captcha element is rendered when the
 * page loads (unless ?render=explicit), with data-sitekey, data-callback, data-expired-callback and
 * data-error-callback; window.hcaptcha has render, execute, getResponse, reset and remove; ?onload=
 * names a function to call once the script is ready; ?recaptchacompat=off leaves out
 * g-recaptcha-response. In place of hCaptcha's challenge there is a checkbox: ticking it asks the
 * stand-in for a response, which goes into the textareas h-captcha-response and g-recaptcha-response
 * that the widget adds inside its element, so they are sent with the form around it. A response
 * expires after 120 seconds, as hCaptcha's do. Its style sheet, /1/widget.css, comes from the script's
 * origin. */
(function () {
  'use strict';
  var src = new URL(document.currentScript.src);
  var server = src.origin;
  var query = src.searchParams;
  var lifetimeMs = 120 * 1000;
  var all = [];

  // The widget's look comes from the stand-in's origin, as hCaptcha's does from its own (style-src).
  var sheet = document.createElement('link');
  sheet.rel = 'stylesheet';
  sheet.href = server + '/1/widget.css';
  document.head.appendChild(sheet);

  function named(name) {
    return name && typeof window[name] === 'function' ? window[name] : null;
  }

  function textarea(name) {
    var t = document.createElement('textarea');
    t.name = name;
    t.hidden = true;
    t.setAttribute('aria-hidden', 'true');
    return t;
  }

  function Widget(el, params) {
    this.el = el;
    this.id = 'hcaptcha-stand-in-' + all.length;
    this.sitekey = params.sitekey || el.getAttribute('data-sitekey') || '';
    this.onPass = params.callback || named(el.getAttribute('data-callback'));
    this.onExpire = params['expired-callback'] || named(el.getAttribute('data-expired-callback'));
    this.onFail = params['error-callback'] || named(el.getAttribute('data-error-callback'));
    this.response = '';
    this.timer = 0;

    this.box = document.createElement('label');
    this.box.className = 'h-captcha-stand-in';
    this.tick = document.createElement('input');
    this.tick.type = 'checkbox';
    this.tick.setAttribute('data-testid', 'hcaptcha-checkbox');
    this.label = document.createElement('span');
    this.box.appendChild(this.tick);
    this.box.appendChild(this.label);
    el.appendChild(this.box);

    this.fields = [textarea('h-captcha-response')];
    if (query.get('recaptchacompat') !== 'off') this.fields.push(textarea('g-recaptcha-response'));
    for (var i = 0; i < this.fields.length; i++) el.appendChild(this.fields[i]);

    var self = this;
    this.tick.addEventListener('change', function () {
      if (self.tick.checked) self.solve();
    });
    this.show('idle', ' I am human');
  }

  Widget.prototype.show = function (state, words) {
    this.box.setAttribute('data-state', state);
    this.label.textContent = words;
  };

  Widget.prototype.set = function (response) {
    this.response = response;
    for (var i = 0; i < this.fields.length; i++) this.fields[i].value = response;
  };

  Widget.prototype.clear = function () {
    clearTimeout(this.timer);
    this.set('');
    this.tick.checked = false;
    this.tick.disabled = false;
    this.show('idle', ' I am human');
  };

  Widget.prototype.solve = function () {
    var self = this;
    self.tick.checked = true;
    self.tick.disabled = true;
    self.show('busy', ' Checking…');
    fetch(server + '/1/token', {
      method: 'POST',
      body: new URLSearchParams({ sitekey: self.sitekey, hostname: location.hostname }),
    }).then(function (resp) {
      return resp.json().then(function (body) {
        if (!resp.ok || !body.response) throw new Error(body.error || 'invalid-data');
        return body.response;
      });
    }).then(function (response) {
      self.set(response);
      self.show('solved', ' Verified');
      self.timer = setTimeout(function () {
        self.clear();
        if (self.onExpire) self.onExpire();
      }, lifetimeMs);
      if (self.onPass) self.onPass(response);
    }).catch(function (err) {
      self.clear();
      self.show('failed', ' Verification failed, try again');
      if (self.onFail) self.onFail(err instanceof TypeError ? 'network-error' : err.message);
    });
  };

  function widget(id) {
    for (var i = 0; i < all.length; i++) {
      if (id === undefined || all[i].id === id) return all[i];
    }
    return null;
  }

  function render(container, params) {
    var el = typeof container === 'string' ? document.getElementById(container) : container;
    if (!el) throw new Error('[hCaptcha] render: no container ' + container);
    var w = new Widget(el, params || {});
    all.push(w);
    return w.id;
  }

  window.hcaptcha = {
    render: render,
    execute: function (id) { var w = widget(id); if (w && !w.response) w.solve(); },
    getResponse: function (id) { var w = widget(id); return w ? w.response : ''; },
    reset: function (id) { var w = widget(id); if (w) w.clear(); },
    remove: function (id) {
      var w = widget(id);
      if (!w) return;
      clearTimeout(w.timer);
      w.box.remove();
      for (var i = 0; i < w.fields.length; i++) w.fields[i].remove();
      all.splice(all.indexOf(w), 1);
    },
  };

  function renderAll() {
    if (query.get('render') !== 'explicit') {
      var els = document.querySelectorAll('.h-captcha');
      for (var i = 0; i < els.length; i++) render(els[i]);
    }
    var onload = named(query.get('onload'));
    if (onload) onload();
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', renderAll);
  else renderAll();
})();
