// skiplock console: the little behaviour htmx attributes cannot express, with no inline code
// (the Content-Security-Policy forbids it).
(function () {
  "use strict";
  // Live fragments do not poll while the tab is hidden...
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail && evt.detail.elt;
    if (document.hidden && elt && elt.hasAttribute("data-poll")) {
      evt.preventDefault();
    }
  });
  // ...and catch up at once when it becomes visible again.
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && window.htmx) {
      document.querySelectorAll("[data-poll]").forEach(function (elt) { window.htmx.trigger(elt, "poll-now"); });
    }
  });
  // The refresh-interval select submits its form on change (the "set" button is the no-JS path).
  document.addEventListener("change", function (evt) {
    var target = evt.target;
    if (target && target.hasAttribute && target.hasAttribute("data-autosubmit") && target.form) {
      target.form.submit();
    }
  });
  // "select all" checkboxes tick every job checkbox of their form.
  document.addEventListener("change", function (evt) {
    var target = evt.target;
    if (target && target.hasAttribute && target.hasAttribute("data-select-all") && target.form) {
      target.form.querySelectorAll("input[name=ids]").forEach(function (box) { box.checked = target.checked; });
    }
  });
})();
