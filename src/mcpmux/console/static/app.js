// mcpmux console: live regions refreshed on server-sent events. No inline script, no eval (CSP).
"use strict";
(function () {
  const url = document.body.dataset.live;
  if (!url || !window.EventSource) return;
  let pending = null;
  async function refresh() {
    pending = null;
    const response = await fetch(location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } });
    if (!response.ok || response.redirected) return;
    const next = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const region of document.querySelectorAll("[data-region]")) {
      const fresh = next.querySelector(`[data-region="${region.dataset.region}"]`);
      if (fresh && fresh.innerHTML !== region.innerHTML) region.replaceWith(document.importNode(fresh, true));
    }
  }
  function soon() {
    // Bursts of events (five list_changed at once) cost one re-fetch.
    if (pending === null) pending = setTimeout(refresh, 250);
  }
  const source = new EventSource(url);
  source.addEventListener("servers", soon);
  source.addEventListener("approvals", soon);
  window.addEventListener("pagehide", () => source.close());
})();
