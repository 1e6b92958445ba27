// Search over the tenant's read pages (GET /v1/search): a query box, then the pages that
// match, best first, each with its document, page and the line that matches. A hit opens the
// page beside its scan with the matches' boxes drawn on it (#/jobs/<id>/pages/<n>?q=...).

import { errorMessage, h, heading, replace } from "../dom.js";

const PAGE_SIZE = 20;

export function searchView(ctx, q) {
  const input = h("input", { type: "search", id: "search-query", name: "q", value: q, required: true, maxlength: "500", "aria-label": "Search the read pages" });
  const form = h("form", { class: "search-form", role: "search" }, input, h("button", { type: "submit" }, "Search"));
  const list = h("ol", { class: "search-hits", id: "search-hits" });
  const message = h("div", { class: "list-message", id: "search-message", "aria-live": "polite" });
  const more = h("button", { type: "button", id: "more-hits", hidden: true }, "More pages");
  let cursor = null;
  let stopped = false;

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.navigate(`#/search?${new URLSearchParams({ q: input.value.trim() })}`);
  });

  async function load(append) {
    try {
      const found = await ctx.api.search(q, { limit: PAGE_SIZE, cursor: append ? cursor : null });
      if (stopped) return;
      const items = found.hits.map(hitItem);
      append ? list.append(...items) : replace(list, items);
      cursor = found.next_cursor;
      more.hidden = !cursor;
      const none = !append && !found.hits.length;
      replace(message, none ? h("p", { class: "empty" }, `No read page matches “${found.query}”.`) : null);
    } catch (error) {
      replace(message, errorMessage(error));
    }
  }

  function hitItem(hit) {
    const href = `#/jobs/${hit.job_id}/pages/${hit.page}?${new URLSearchParams({ q })}`;
    const matches = hit.boxes.length === 1 ? "1 match" : `${hit.boxes.length} matches`;
    return h(
      "li",
      { class: "search-hit", dataset: { jobId: hit.job_id, page: String(hit.page) } },
      h("a", { href }, `${hit.source}, page ${hit.page}`),
      h("span", { class: "hit-count" }, ` · ${matches}`),
      h("p", { class: "snippet" }, hit.snippet),
    );
  }

  more.addEventListener("click", async () => {
    more.disabled = true; // a second click before the answer would add the same hits twice
    await load(true);
    more.disabled = false;
  });
  if (q) load(false);
  const element = h(
    "section",
    { class: "search" },
    h("div", { class: "toolbar" }, heading("Search")),
    form,
    h("p", { class: "hint" }, "Words are matched in any form (run, runs, running); \"quote a phrase\"; -leave a word out. Chinese is matched as written."),
    list,
    message,
    more,
  );
  return { element, focus: q ? null : input, stop: () => (stopped = true) };
}
