// amux ui: search as you type, and the overview's lint summary loaded after the page.
// The page works without this file (the form submits normally; the overview links to /lint).
// Fragments are HTML rendered and escaped by the server; this only fetches and places them.
"use strict";
(function () {
  const lint = document.getElementById("lint-summary");
  if (!lint || !lint.dataset.src) { return; }
  fetch(lint.dataset.src, { credentials: "same-origin" })
    .then(function (answer) { return answer.ok ? answer.text() : Promise.reject(answer.status); })
    .then(function (html) { lint.innerHTML = html; })
    .catch(function () { /* keep the link to /lint */ });
})();
(function () {
  const form = document.getElementById("search-form");
  const input = document.getElementById("q");
  const results = document.getElementById("results");
  if (!form || !input || !results) { return; }
  let timer = null;
  let seq = 0;
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(async function () {
      const q = input.value.trim();
      const mine = ++seq;
      const url = "/search?q=" + encodeURIComponent(q);
      try {
        const answer = await fetch(url + "&fragment=1", { credentials: "same-origin" });
        const html = await answer.text();
        if (mine !== seq) { return; }
        results.innerHTML = html;
        history.replaceState(null, "", url);
      } catch (err) {
        results.textContent = "Search failed: " + err;
      }
    }, 150);
  });
})();
