/* busy.js: the busy page tries the shop again by itself after the delay the server gave, as its
 * <noscript> refresh does without JavaScript, unless the visitor starts using the page first. A key
 * press, click or tap stops the automatic retry and removes the sentence that announced it, leaving
 * the "Try again" button: a page must not reload under someone reading or tabbing through it (WCAG 2.1
 * success criterion 2.2.1, a time limit the user can turn off; a <meta> refresh gives no such way). */
(function () {
  'use strict';
  var sentence = document.getElementById('retrying');
  if (!sentence) return;
  var seconds = Number(sentence.dataset.seconds) || 5;
  var timer = setTimeout(function () { location.reload(); }, seconds * 1000);
  function stop() {
    clearTimeout(timer);
    if (sentence.parentNode) sentence.parentNode.removeChild(sentence);
    ['keydown', 'pointerdown'].forEach(function (type) { document.removeEventListener(type, stop, true); });
  }
  ['keydown', 'pointerdown'].forEach(function (type) { document.addEventListener(type, stop, true); });
})();
