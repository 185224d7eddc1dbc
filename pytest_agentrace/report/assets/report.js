// pytest-agentrace HTML report: theme toggle, sortable tables, expandable run rows, run filter and outcome
// toggles. Inlined; no network.
(function () {
  "use strict";
  var root = document.documentElement;

  function storedTheme() {
    try { return window.localStorage.getItem("agentrace-theme"); } catch (e) { return null; }
  }
  function setTheme(theme) {
    root.setAttribute("data-theme", theme);
    var button = document.getElementById("theme-toggle");
    if (button) {
      button.textContent = theme === "dark" ? "Light theme" : "Dark theme";
      button.setAttribute("aria-pressed", theme === "dark" ? "true" : "false");
    }
    try { window.localStorage.setItem("agentrace-theme", theme); } catch (e) { /* file:// without storage */ }
  }

  // Sort key of a cell: data-sort (numbers) when present, else its text.
  function key(cell, numeric) {
    if (!cell) { return numeric ? -Infinity : ""; }
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
    if (numeric) {
      var n = parseFloat(raw);
      return isNaN(n) ? -Infinity : n;
    }
    return raw.toLowerCase();
  }

  function sortTable(table, index, th) {
    var numeric = th.getAttribute("data-type") === "num";
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.querySelectorAll("thead th"), function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    // Groups: each tbody.run (a run row and its details row) moves as one; else single rows of the tbody.
    var groups = table.querySelectorAll("tbody.run");
    var items, parent;
    if (groups.length) {
      items = Array.prototype.slice.call(groups);
      parent = table;
    } else {
      parent = table.tBodies[0];
      items = Array.prototype.slice.call(parent.rows);
    }
    var decorated = items.map(function (item, i) {
      var row = item.tagName === "TBODY" ? item.rows[0] : item;
      return { item: item, k: key(row.cells[index], numeric), i: i };
    });
    decorated.sort(function (a, b) {
      if (a.k < b.k) { return ascending ? -1 : 1; }
      if (a.k > b.k) { return ascending ? 1 : -1; }
      return a.i - b.i;
    });
    decorated.forEach(function (d) { parent.appendChild(d.item); });
  }

  // The runs table's filter: a run is shown when its status is toggled on and every word typed appears in its
  // data-search text (case, kind, arm, agent, rep, status). A hidden run's details row hides with it (same tbody).
  function filterRuns() {
    var table = document.getElementById("runs");
    if (!table) { return; }
    var box = document.getElementById("run-filter-text");
    var words = (box ? box.value : "").toLowerCase().split(/\s+/).filter(function (w) { return w.length > 0; });
    var on = {};
    Array.prototype.forEach.call(document.querySelectorAll("input.outcome-toggle"), function (t) {
      on[t.value] = t.checked;
    });
    var runs = table.querySelectorAll("tbody.run");
    var shown = 0;
    Array.prototype.forEach.call(runs, function (run) {
      var text = run.getAttribute("data-search") || "";
      var visible = on[run.getAttribute("data-status")] !== false &&
        words.every(function (w) { return text.indexOf(w) !== -1; });
      run.hidden = !visible;
      if (visible) { shown += 1; }
    });
    var count = document.getElementById("run-filter-count");
    if (count) { count.textContent = shown + " of " + runs.length + " runs shown"; }
  }

  function init() {
    setTheme(root.getAttribute("data-theme") || "light");
    var toggle = document.getElementById("theme-toggle");
    if (toggle) {
      toggle.addEventListener("click", function () {
        setTheme(root.getAttribute("data-theme") === "dark" ? "light" : "dark");
      });
    }
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
      Array.prototype.forEach.call(table.querySelectorAll("thead th"), function (th, index) {
        if (th.classList.contains("nosort")) { return; }
        th.setAttribute("tabindex", "0");
        th.addEventListener("click", function () { sortTable(table, index, th); });
        th.addEventListener("keydown", function (e) {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortTable(table, index, th); }
        });
      });
    });
    var box = document.getElementById("run-filter-text");
    if (box) { box.addEventListener("input", filterRuns); }
    Array.prototype.forEach.call(document.querySelectorAll("input.outcome-toggle"), function (t) {
      t.addEventListener("change", filterRuns);
    });
    filterRuns();
    Array.prototype.forEach.call(document.querySelectorAll("button.expand"), function (button) {
      button.addEventListener("click", function () {
        var details = document.getElementById(button.getAttribute("aria-controls"));
        var open = button.getAttribute("aria-expanded") === "true";
        button.setAttribute("aria-expanded", open ? "false" : "true");
        button.textContent = open ? "▸" : "▾";
        if (details) { details.hidden = open; }
      });
    });
  }

  // Apply the saved or preferred theme before first paint, then wire the page.
  var initial = storedTheme();
  if (!initial) {
    initial = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  root.setAttribute("data-theme", initial);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
