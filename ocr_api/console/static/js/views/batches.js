// The tenant's batches above its jobs: each one's status, documents and pages settled, and the
// estimated finish, refreshed with the jobs list. Hidden while the tenant has none.

import { formatTime, h, progressBar, replace, statusBadge } from "../dom.js";

export function batchesPanel(api) {
  const tbody = h("tbody");
  const element = h(
    "section",
    { class: "batches", id: "batches-panel", hidden: true },
    h("h2", {}, "Batches"),
    h(
      "table",
      { class: "job-table", id: "batches" },
      h("caption", { class: "visually-hidden" }, "Your batches, newest first"),
      h(
        "thead",
        {},
        h("tr", {}, ["Batch", "Status", "Documents", "Pages", "Estimated finish", "Created"].map((t) => h("th", { scope: "col" }, t))),
      ),
      tbody,
    ),
  );

  async function refresh() {
    const { batches } = await api.listBatches({ limit: 20 });
    element.hidden = batches.length === 0;
    replace(tbody, batches.map(batchRow));
  }

  return { element, refresh };
}

function batchRow(batch) {
  const d = batch.documents;
  const settled = d.succeeded + d.failed + d.canceled;
  const waiting = d.waiting ? `, ${d.waiting} waiting` : "";
  const pages = batch.pages;
  return h(
    "tr",
    { dataset: { batchId: batch.id, status: batch.status } },
    h("td", {}, batch.name || batch.id),
    h("td", {}, statusBadge(batch.status)),
    h("td", {}, `${settled}/${d.total} settled${d.failed ? `, ${d.failed} failed` : ""}${waiting}`),
    h("td", {}, [progressBar(pages.done, pages.failed, pages.total), ` ${pages.done}/${pages.total}`]),
    h("td", {}, batch.estimated_finish_at ? formatTime(batch.estimated_finish_at) : "—"),
    h("td", {}, formatTime(batch.created_at)),
  );
}
