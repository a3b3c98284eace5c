// skiplock console: the little behaviour htmx attributes cannot express, with no inline code
// (the Content-Security-Policy forbids it).
(function () {
  "use strict";
  // A live fragment holds its poll while the operator is using it: a ticked checkbox (a selection
  // for "Release selected"), or a focused form field inside it. Swapping then would throw the work away.
  function inUse(elt) {
    if (elt.querySelector("input[type=checkbox]:checked")) { return true; }
    var active = document.activeElement;
    return !!(active && elt.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName));
  }
  // Live fragments do not poll while the tab is hidden or while in use...
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail && evt.detail.elt;
    if (elt && elt.hasAttribute("data-poll") && (document.hidden || inUse(elt))) {
      evt.preventDefault();
      if (!document.hidden) { peek(elt); }
    }
  });

  // ...but a held poll is never silent: a badge above the fragment says refresh is paused and how
  // many of its rows changed meanwhile (read in the background, not swapped in), with a button to
  // resume. Unticking the last box or leaving the field resumes by itself.
  function rowsOf(root) {
    var rows = {};
    root.querySelectorAll("tbody tr, article[data-check]").forEach(function (row, i) {
      var key = row.getAttribute("data-job-id") || row.getAttribute("data-queue") || row.getAttribute("data-worker-id") ||
        row.getAttribute("data-schedule") || row.getAttribute("data-check") || "#" + i;
      // what a row says, without what changes by itself as the clock runs: a relative time counts
      // by its absolute value, a ticking duration (data-tick) not at all
      var copy = row.cloneNode(true);
      copy.querySelectorAll("time").forEach(function (t) { t.textContent = t.getAttribute("datetime") || ""; });
      copy.querySelectorAll("[data-tick]").forEach(function (t) { t.textContent = ""; });
      rows[key] = copy.textContent.replace(/\s+/g, " ").trim();
    });
    return rows;
  }
  function changedRows(shown, fresh) {
    var n = 0, key;
    for (key in fresh) { if (shown[key] !== fresh[key]) { n++; } }
    for (key in shown) { if (!(key in fresh)) { n++; } }
    return n;
  }
  function badgeFor(elt) {
    var id = "paused-" + elt.id, badge = document.getElementById(id);
    if (badge) { return badge; }
    badge = document.createElement("div");
    badge.id = id;
    badge.className = "live-paused";
    badge.setAttribute("role", "status");
    badge.setAttribute("data-paused-for", elt.id);
    var text = document.createElement("span");
    text.className = "live-paused-text";
    var button = document.createElement("button");
    button.type = "button";
    button.className = "small";
    button.textContent = "resume";
    button.addEventListener("click", function () { resume(elt.id, true); });
    badge.appendChild(text);
    badge.appendChild(document.createTextNode(" "));
    badge.appendChild(button);
    elt.parentNode.insertBefore(badge, elt);
    return badge;
  }
  function peek(elt) {
    var badge = badgeFor(elt);
    var url = elt.getAttribute("hx-get");
    var text = badge.querySelector(".live-paused-text");
    if (!badge.hasAttribute("data-changes")) {
      badge.setAttribute("data-changes", "0");
      text.textContent = "Live refresh paused while you select or type.";
    }
    if (!url || badge.getAttribute("data-busy") === "1") { return; }
    badge.setAttribute("data-busy", "1");
    fetch(url, { headers: { "HX-Request": "true" }, credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      badge.removeAttribute("data-busy");
      var current = document.getElementById(elt.id);
      if (html === null || !current || !document.getElementById(badge.id)) { return; }
      var fresh = new DOMParser().parseFromString(html, "text/html");
      var n = changedRows(rowsOf(current), rowsOf(fresh));
      badge.setAttribute("data-changes", String(n));
      text.textContent = "Live refresh paused while you select or type: " + n +
        (n === 1 ? " row has" : " rows have") + " changed since.";
    }).catch(function () { badge.removeAttribute("data-busy"); });
  }
  function resume(id, clear) {
    var elt = document.getElementById(id);
    var badge = document.getElementById("paused-" + id);
    if (!elt) { return; }
    if (clear) {
      elt.querySelectorAll("input[type=checkbox]:checked").forEach(function (box) { box.checked = false; });
      if (document.activeElement && elt.contains(document.activeElement)) { document.activeElement.blur(); }
    }
    if (inUse(elt)) { return; }
    if (badge) { badge.parentNode.removeChild(badge); }
    if (window.htmx) { window.htmx.trigger(elt, "poll-now"); }
  }
  function resumeIfIdle(evt) {
    var target = evt.target;
    var elt = target && target.closest ? target.closest("[data-poll]") : null;
    if (elt && document.getElementById("paused-" + elt.id)) {
      // focusout fires before the focus moves: look once the new focus is known
      setTimeout(function () { resume(elt.id, false); }, 0);
    }
  }
  document.addEventListener("change", resumeIfIdle);
  document.addEventListener("focusout", resumeIfIdle);

  // What the operator did inside a fragment survives its refresh: which <details> are open or
  // closed, which boxes are ticked, and where the focus is. Only the data is replaced.
  function keyOf(el, index) {
    return el.getAttribute("data-key") || el.id || (el.name ? el.name + "=" + el.value : "") ||
      el.getAttribute("href") || el.tagName + "#" + index;
  }
  var kept = {};
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var elt = evt.detail && evt.detail.target;
    if (!elt || !elt.id || !elt.hasAttribute("data-poll")) { return; }
    var state = { details: {}, checked: [], focus: null };
    elt.querySelectorAll("details").forEach(function (d, i) { state.details[keyOf(d, i)] = d.open; });
    elt.querySelectorAll("input[type=checkbox]:checked").forEach(function (c, i) { state.checked.push(keyOf(c, i)); });
    var active = document.activeElement;
    if (active && elt.contains(active)) {
      var all = Array.prototype.slice.call(elt.querySelectorAll("a, button, input, select, textarea, summary"));
      state.focus = keyOf(active, all.indexOf(active));
    }
    kept[elt.id] = state;
  });
  document.addEventListener("htmx:afterSettle", function (evt) {
    var target = evt.detail && evt.detail.target;
    var id = target && target.id;
    var stale = id && document.getElementById("paused-" + id);
    if (stale) { stale.parentNode.removeChild(stale); }
    var state = id && kept[id];
    var elt = id && document.getElementById(id);
    if (!state || !elt) { return; }
    delete kept[id];
    elt.querySelectorAll("details").forEach(function (d, i) {
      var key = keyOf(d, i);
      if (key in state.details) { d.open = state.details[key]; }
    });
    elt.querySelectorAll("input[type=checkbox]").forEach(function (c, i) {
      if (state.checked.indexOf(keyOf(c, i)) >= 0) { c.checked = true; }
    });
    if (state.focus) {
      var all = Array.prototype.slice.call(elt.querySelectorAll("a, button, input, select, textarea, summary"));
      for (var i = 0; i < all.length; i++) {
        if (keyOf(all[i], i) === state.focus) { all[i].focus({ preventScroll: true }); break; }
      }
    }
  });
  // ...and catch up at once when it becomes visible again.
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && window.htmx) {
      document.querySelectorAll("[data-poll]").forEach(function (elt) { window.htmx.trigger(elt, "poll-now"); });
    }
  });
  // The refresh-interval select submits its form on change (the "set" button is the no-JS path).
  // From the keyboard, arrow keys change the value at every step: submit only on Enter or when the
  // select loses focus, so that moving through the choices does not reload the page.
  var keyed = null;
  document.addEventListener("keydown", function (evt) {
    var target = evt.target;
    if (!target || !target.hasAttribute || !target.hasAttribute("data-autosubmit")) { return; }
    if (evt.key === "Enter" && target.form) { evt.preventDefault(); target.form.submit(); return; }
    if (evt.key !== "Tab") { keyed = target; }
  });
  document.addEventListener("change", function (evt) {
    var target = evt.target;
    if (target && target.hasAttribute && target.hasAttribute("data-autosubmit") && target.form && keyed !== target) {
      target.form.submit();
    }
  });
  document.addEventListener("focusout", function (evt) {
    var target = evt.target;
    if (target === keyed && target.form) {
      keyed = null;
      if (target.value !== target.getAttribute("data-current")) { target.form.submit(); }
    }
  });
  // "select all" checkboxes tick every job checkbox of their form.
  document.addEventListener("change", function (evt) {
    var target = evt.target;
    if (target && target.hasAttribute && target.hasAttribute("data-select-all") && target.form) {
      target.form.querySelectorAll("input[name=ids]").forEach(function (box) { box.checked = target.checked; });
    }
  });
  // The nav menu (templates/layout.html) is open in the HTML, so that it works without scripts; on a phone
  // it starts closed (its summary keeps the current area and the Health badge in sight) and opens on a tap.
  // The width is the stylesheet's phone breakpoint; a wide screen always shows it open.
  var phone = window.matchMedia("(max-width: 600px)");
  function fitMenu() {
    document.querySelectorAll("details[data-nav-menu]").forEach(function (menu) { menu.open = !phone.matches; });
  }
  fitMenu();
  if (phone.addEventListener) { phone.addEventListener("change", fitMenu); }
  // Escape closes an open phone menu.
  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Escape" || !phone.matches) { return; }
    document.querySelectorAll("details[data-nav-menu][open]").forEach(function (menu) { menu.open = false; });
  });
})();
