// The pages worth a human look (GET /v1/review), oldest first: each with its document, why it
// is listed (failed, a warning, low confidence), a link to the page beside its scan, and a
// button that marks it reviewed (the row leaves; the API's audit log names who).

import { announce, errorMessage, formatTime, h, heading, replace, statusBadge } from "../dom.js";

const PAGE_SIZE = 100;

export function reviewView(ctx) {
  const tbody = h("tbody");
  const message = h("div", { class: "list-message", id: "review-message", "aria-live": "polite" });
  let stopped = false;

  async function load() {
    try {
      const { pages } = await ctx.api.pagesToReview({ limit: PAGE_SIZE });
      if (stopped) return;
      replace(tbody, pages.map(row));
      replace(message, pages.length ? null : h("p", { class: "empty" }, "No pages to review."));
    } catch (error) {
      replace(message, errorMessage(error));
    }
  }

  function row(page) {
    const open = `#/jobs/${page.job_id}/pages/${page.page}`;
    const mark = h("button", { type: "button", class: "mark-reviewed" }, "Mark reviewed");
    const tr = h(
      "tr",
      { dataset: { jobId: page.job_id, page: String(page.page) } },
      h("td", {}, h("a", { href: open }, `${page.source || page.job_id}, page ${page.page}`)),
      h("td", {}, statusBadge(page.status)),
      h("td", { class: "review-reason" }, reason(page)),
      h("td", {}, formatTime(page.finished_at)),
      h("td", {}, mark),
    );
    mark.addEventListener("click", async () => {
      mark.disabled = true;
      try {
        await ctx.api.markReviewed(page.job_id, page.page);
        tr.remove();
        announce(`Page ${page.page} of ${page.source || page.job_id} marked reviewed`);
        if (!tbody.children.length) load(); // the next pages, if the list had more than shown
      } catch (error) {
        mark.disabled = false;
        replace(message, errorMessage(error));
      }
    });
    return tr;
  }

  const element = h(
    "section",
    { class: "review" },
    h("div", { class: "toolbar" }, heading("Pages to review")),
    h(
      "table",
      { class: "job-table", id: "review" },
      h("caption", { class: "visually-hidden" }, "Pages worth a look, oldest first"),
      h("thead", {}, h("tr", {}, ["Page", "Status", "Why", "Read", ""].map((t) => h("th", { scope: "col" }, t)))),
      tbody,
    ),
    message,
  );
  load();
  return { element, stop: () => (stopped = true) };
}

/** Why the page is on the list, in words. */
function reason(page) {
  const parts = [];
  if (page.error) parts.push(page.error);
  for (const warning of page.warnings) parts.push(warning.replaceAll("_", " "));
  if (page.confidence !== null && page.confidence !== undefined) {
    parts.push(`confidence ${Math.round(page.confidence * 100)}%`);
  }
  return parts.join("; ");
}
