// Herald console: live figures and sparklines from /ui/stats, the live tail over
// server-sent events, and "select all" on the dead-letter list. No dependencies.
(function () {
  "use strict";
  var history = {}; // figure name -> last values
  var keep = 60;

  function spark(svg, values) {
    var w = 120, h = 26, max = Math.max.apply(null, values.concat([1])), min = Math.min.apply(null, values.concat([0]));
    var span = max - min || 1, step = values.length > 1 ? w / (values.length - 1) : w;
    var pts = values.map(function (v, i) { return (i * step).toFixed(1) + "," + (h - 2 - (v - min) / span * (h - 4)).toFixed(1); });
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.innerHTML = '<polyline points="' + pts.join(" ") + '"/>';
  }

  function flatten(f) {
    var out = { seq: f.seq, dead_letters: f.dead_letters };
    (f.groups || []).forEach(function (g) {
      ["messages", "ready", "in_flight", "delivered", "dead_letters", "delayed", "leased",
        "oldest_ready_seconds", "acked", "nacked", "dead_lettered"].forEach(function (k) { out["g." + g.id + "." + k] = g[k]; });
    });
    (f.streams || []).forEach(function (s) {
      ["position", "lag", "delivered", "pending"].forEach(function (k) { out["s." + s.id + "." + k] = s[k]; });
    });
    return out;
  }

  function apply(f) {
    var figs = flatten(f);
    Object.keys(figs).forEach(function (k) {
      if (figs[k] < 0) return;
      var h = history[k] || (history[k] = []);
      h.push(figs[k]);
      if (h.length > keep) h.shift();
    });
    document.querySelectorAll("[data-fig]").forEach(function (el) {
      var v = figs[el.getAttribute("data-fig")];
      if (v === undefined) return;
      v = v < 0 ? "\u2014" : String(v); // -1: a figure the principal may not read
      if (v !== el.textContent) el.textContent = v;
    });
    document.querySelectorAll("svg[data-spark]").forEach(function (svg) {
      var h = history[svg.getAttribute("data-spark")];
      if (h) spark(svg, h);
    });
  }

  function poll() {
    fetch("/ui/stats", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (f) { if (f) apply(f); })
      .catch(function () {})
      .then(function () { setTimeout(poll, 1000); });
  }
  if (document.querySelector("[data-fig]")) poll();

  var events = document.getElementById("events");
  if (events && events.getAttribute("data-pattern")) {
    var state = document.getElementById("state");
    var src = new EventSource("/ui/tail/events?pattern=" + encodeURIComponent(events.getAttribute("data-pattern")));
    src.onopen = function () { state.textContent = "live"; };
    src.onmessage = function (m) {
      var ev = JSON.parse(m.data), row = document.createElement("div");
      row.className = "event " + ev.type;
      row.innerHTML = '<b></b> <span class="muted"></span> <code></code>';
      row.children[0].textContent = ev.type;
      row.children[1].textContent = "seq " + ev.seq;
      row.children[2].textContent = ev.code ? ev.code + " " + ev.message : JSON.stringify(ev.match);
      events.insertBefore(row, events.firstChild);
      while (events.children.length > 500) events.removeChild(events.lastChild);
      if (ev.type === "error") { state.textContent = "ended: " + ev.code; src.close(); }
    };
    src.onerror = function () { if (src.readyState === 2) state.textContent = "closed"; };
  }

  var all = document.getElementById("select-all");
  if (all) all.addEventListener("change", function () {
    document.querySelectorAll('input[name="ids"]').forEach(function (c) { c.checked = all.checked; });
  });
})();
