// weir console: live updates only. Every action works without this file
// (forms post and redirect); it keeps the open page current from the
// server-sent events of /console/events by re-reading the page itself.
(function () {
  'use strict';
  var body = document.body;
  var live = body.getAttribute('data-live');
  if (!live || !window.EventSource || !window.fetch || !window.DOMParser) { return; }
  var status = document.getElementById('live');
  function say(text, state) {
    if (status) { status.textContent = 'Live updates: ' + text; }
    body.setAttribute('data-live-state', state);
  }
  var timer = null;
  var refreshes = 0;
  var es = new EventSource('/console/events');
  es.addEventListener('ready', function () { say('on', 'open'); });
  es.addEventListener('ended', function () { es.close(); say('off (your session ended; log in again)', 'ended'); });
  es.onerror = function () { say('reconnecting…', 'error'); };
  es.addEventListener('withdrawal', function (ev) {
    var d;
    try { d = JSON.parse(ev.data); } catch (e) { return; }
    if (live !== 'all' && d.id !== live) { return; }
    schedule(250);
  });
  function schedule(ms) {
    if (timer === null) { timer = window.setTimeout(refresh, ms); }
  }
  // typing: someone is writing into a field of the page; do not replace it.
  function typing() {
    var a = document.activeElement;
    if (!a || !a.value) { return false; }
    return a.tagName === 'TEXTAREA' || (a.tagName === 'INPUT' && a.type !== 'hidden' && a.type !== 'submit');
  }
  function refresh() {
    timer = null;
    if (typing()) { schedule(2000); return; }
    window.fetch(window.location.href, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } })
      .then(function (r) {
        if (!r.ok) { throw new Error('status ' + r.status); }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        var fresh = doc.getElementById('main');
        var cur = document.getElementById('main');
        if (!fresh || !cur) { return; }
        cur.parentNode.replaceChild(document.importNode(fresh, true), cur);
        refreshes += 1;
        body.setAttribute('data-refreshes', String(refreshes));
      })
      .catch(function () { say('could not refresh; reload the page', 'error'); });
  }
}());
