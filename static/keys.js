// skiplock console: keyboard shortcuts (docs/howto/console.md, "Keyboard"). No framework, no inline code.
//   /        focus the search (on Search), else open Search with its first field focused
//   ?        show or hide the list of keys (Esc hides it)
//   g o, g d, g r, g w, g h   go to Overview, Dead letters, Recurring, Workers, Health
//   j, k     on a page of rows: move to the next / previous row (Enter opens its first link)
//   x        tick or untick the current row's checkbox (the bulk forms' selection)
// Keys are ignored while typing in a field, and with Ctrl, Alt or Meta (the browser's own shortcuts).
(function () {
  "use strict";
  var KEYS = [
    ["/", "focus the search"],
    ["?", "show or hide this list"],
    ["g o", "go to Overview"], ["g d", "go to Dead letters"], ["g r", "go to Recurring"],
    ["g w", "go to Workers"], ["g h", "go to Health"],
    ["j", "next row"], ["k", "previous row"], ["x", "select or unselect the current row"],
    ["Enter", "open the current row"], ["Esc", "close this list"]
  ];
  var GOTO_WAIT_MS = 1500;  // how long "g" waits for the page's letter
  var pendingG = 0;
  var current = null;  // the key (data-job-id, else the row's index) of the row j and k last moved to

  function destinations() {
    try { return JSON.parse(document.body.getAttribute("data-goto") || "{}"); } catch (e) { return {}; }
  }
  function typing(target) {
    if (!target || !target.tagName) { return false; }
    return /^(INPUT|SELECT|TEXTAREA)$/.test(target.tagName) || target.isContentEditable;
  }
  // the page's job rows when it lists jobs (Dead letters lists its groups above them), else every table row
  function rows() {
    var jobs = document.querySelectorAll("main table tbody tr[data-job-id]");
    var found = jobs.length ? jobs : document.querySelectorAll("main table tbody tr");
    return Array.prototype.slice.call(found).filter(function (row) {
      return !row.querySelector("td.empty") && row.offsetParent !== null;
    });
  }
  function keyOf(row, i) { return row.getAttribute("data-job-id") || row.getAttribute("data-queue") || "#" + i; }
  function mark(row) {
    document.querySelectorAll("tr.kb-current").forEach(function (r) { r.classList.remove("kb-current"); });
    row.classList.add("kb-current");
    var link = row.querySelector("a[href]");
    if (link) { link.focus({ preventScroll: true }); }
    row.scrollIntoView({ block: "nearest" });
  }
  function move(step) {
    var all = rows();
    if (!all.length) { return; }
    var at = -1;
    all.forEach(function (row, i) { if (keyOf(row, i) === current) { at = i; } });
    var next = at < 0 ? (step > 0 ? 0 : all.length - 1) : Math.min(all.length - 1, Math.max(0, at + step));
    current = keyOf(all[next], next);
    mark(all[next]);
  }
  function toggle() {
    var row = document.querySelector("tr.kb-current");
    var box = row && row.querySelector("input[type=checkbox]");
    if (!box || box.disabled) { return; }
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));  // the live fragment pauses for a selection
  }
  function focusSearch() {
    var field = document.querySelector("form.search input:not([type=hidden])");
    if (field) { field.focus(); field.select(); return; }
    var target = destinations().s;
    if (target) { window.location.assign(target + "#focus"); }
  }
  function help() {
    var open = document.getElementById("keys-help");
    if (open) { open.parentNode.removeChild(open); return; }
    var box = document.createElement("div");
    box.id = "keys-help";
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-label", "Keyboard shortcuts");
    var title = document.createElement("h2");
    title.textContent = "Keyboard shortcuts";
    box.appendChild(title);
    var list = document.createElement("dl");
    KEYS.forEach(function (pair) {
      var dt = document.createElement("dt");
      pair[0].split(" ").forEach(function (k, i) {
        if (i) { dt.appendChild(document.createTextNode(" then ")); }
        var kbd = document.createElement("kbd");
        kbd.textContent = k;
        dt.appendChild(kbd);
      });
      var dd = document.createElement("dd");
      dd.textContent = pair[1];
      list.appendChild(dt);
      list.appendChild(dd);
    });
    box.appendChild(list);
    document.body.appendChild(box);
  }
  document.addEventListener("keydown", function (evt) {
    if (evt.ctrlKey || evt.metaKey || evt.altKey || typing(evt.target)) { return; }
    var key = evt.key;
    if (pendingG && Date.now() - pendingG < GOTO_WAIT_MS) {
      pendingG = 0;
      var target = destinations()[key];
      if (target) { evt.preventDefault(); window.location.assign(target); }
      return;
    }
    pendingG = 0;
    if (key === "Escape") {
      var open = document.getElementById("keys-help");
      if (open) { open.parentNode.removeChild(open); }
      return;
    }
    var actions = { "/": focusSearch, "?": help, "j": function () { move(1); }, "k": function () { move(-1); },
                    "x": toggle, "g": function () { pendingG = Date.now(); } };
    if (actions[key]) { evt.preventDefault(); actions[key](); }
  });
  // a live refresh replaces the rows: the current one keeps its mark (by its key)
  document.addEventListener("htmx:afterSettle", function () {
    if (current === null) { return; }
    rows().forEach(function (row, i) { if (keyOf(row, i) === current) { row.classList.add("kb-current"); } });
  });
  document.documentElement.setAttribute("data-keys", "on");  // the keys are listened for from here on
  // "/" from another page opens Search with its first field focused
  document.addEventListener("DOMContentLoaded", function () {
    if (window.location.hash === "#focus") {
      var field = document.querySelector("form.search input:not([type=hidden])");
      if (field) { field.focus(); }
    }
  });
})();
