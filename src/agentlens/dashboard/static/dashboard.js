// agentlens dashboard: claims that show their evidence, and the keyboard-driven review queue.
// Served from /static (the Content-Security-Policy allows no inline script).
"use strict";

function showFinding(n, scroll) {
  document.querySelectorAll("a.claim.active, li.finding.active, mark.evidence.shown")
    .forEach(function (el) { el.classList.remove("active", "shown"); });
  var why = document.getElementById("why-" + n);
  document.querySelectorAll("a.claim[data-finding='" + n + "']")
    .forEach(function (claim) { claim.classList.add("active"); });
  if (why) { why.classList.add("active"); }
  var target = document.getElementById("evidence-" + n);
  if (target) {
    target.classList.add("shown");
  } else if (why && why.dataset.step) {
    target = document.getElementById("step-" + why.dataset.step);
  }
  if (!target) { target = why; }
  if (!target) { return; }
  var details = target.closest("details");
  if (details) { details.open = true; }
  if (scroll) { target.scrollIntoView({ block: "center" }); }
  target.classList.remove("flash");
  void target.offsetWidth;
  target.classList.add("flash");
}

function initClaims() {
  document.querySelectorAll("a.claim").forEach(function (claim) {
    claim.addEventListener("click", function (event) {
      event.preventDefault();
      var n = claim.dataset.finding;
      history.replaceState(null, "", "#why-" + n);
      showFinding(n, true);
    });
  });
  var hash = /^#why-(\d+)$/.exec(location.hash);
  if (hash) { showFinding(hash[1], false); }
}

function initQueue() {
  var queue = document.getElementById("queue");
  if (!queue) { return; }
  var items = Array.prototype.slice.call(queue.querySelectorAll("li.queue-item"));
  var at = Math.min(parseInt(queue.dataset.at || "0", 10) || 0, Math.max(items.length - 1, 0));

  function select(i) {
    if (!items.length) { return; }
    at = Math.max(0, Math.min(items.length - 1, i));
    items.forEach(function (el, j) { el.classList.toggle("selected", j === at); });
    items[at].scrollIntoView({ block: "nearest" });
    items[at].focus({ preventScroll: true });
    remember(at);
  }

  // The selection in the URL (?at=), so that Back from the evidence, or a reload, comes back
  // to the same finding: the page is no-store, so the browser reloads it.
  function remember(i) {
    var url = new URL(location.href);
    if (url.searchParams.get("at") === String(i)) { return; }
    url.searchParams.set("at", String(i));
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }

  function submit(verdict) {
    var form = items[at] && items[at].querySelector("form.verdict");
    if (!form) { return; }
    form.requestSubmit(form.querySelector("button[value='" + verdict + "']"));
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var typing = /^(TEXTAREA|INPUT|SELECT)$/.test(event.target.tagName);
    if (typing) {
      if (event.key === "Escape") { event.target.blur(); select(at); }
      return;
    }
    switch (event.key) {
      case "j": select(at + 1); break;
      case "k": select(at - 1); break;
      case "c": submit("confirmed"); break;
      case "f": submit("false_positive"); break;
      case "e": if (items[at]) { location.href = items[at].dataset.evidence; } break;
      case "n": {
        var note = items[at] && items[at].querySelector("textarea.note");
        if (note) { note.focus(); }
        break;
      }
      default: return;
    }
    event.preventDefault();
  });
  select(at);
}

document.addEventListener("DOMContentLoaded", function () {
  initClaims();
  initQueue();
});
