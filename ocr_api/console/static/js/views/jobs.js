// The tenant's jobs, newest first, filtered by status, refreshed live by polling GET /v1/jobs.
// Rows are updated in place (keyed by job id), so focus and scroll survive each refresh.

import { h, heading, errorMessage, formatTime, progressBar, replace, statusBadge } from "../dom.js";
import { Poller } from "../poller.js";
import { batchesPanel } from "./batches.js";

const STATUSES = ["queued", "running", "succeeded", "failed", "canceled"];
const PAGE_SIZE = 50;
const POLL_MS = 2000;

export function jobsView(ctx, params) {
  const status = STATUSES.includes(params.get("status")) ? params.get("status") : "";
  const tbody = h("tbody");
  const rows = new Map(); // job id -> <tr>
  const olderJobs = []; // pages fetched with "Show older" (not polled: old jobs rarely change)
  let cursor = null;
  const message = h("div", { class: "list-message", "aria-live": "polite" });
  const more = h("button", { type: "button", id: "older-jobs", hidden: true }, "Show older jobs");
  const batches = batchesPanel(ctx.api);

  function render(jobs) {
    const ids = new Set(jobs.map((job) => job.id));
    for (const [id, row] of rows) if (!ids.has(id)) (row.remove(), rows.delete(id));
    jobs.forEach((job, index) => {
      const row = rows.get(job.id) || rows.set(job.id, h("tr", { dataset: { jobId: job.id } })).get(job.id);
      fillRow(row, job);
      if (tbody.children[index] !== row) tbody.insertBefore(row, tbody.children[index] || null);
    });
    replace(message, jobs.length ? null : h("p", { class: "empty" }, emptyText(status)));
  }

  const poller = new Poller(
    async () => {
      const [first] = await Promise.all([ctx.api.listJobs({ status, limit: PAGE_SIZE }), batches.refresh()]);
      if (cursor === null) cursor = first.next_cursor;
      more.hidden = !cursor;
      render([...first.jobs, ...olderJobs.filter((job) => !first.jobs.some((j) => j.id === job.id))]);
    },
    POLL_MS,
    (error) => replace(message, errorMessage(error)),
  );

  more.addEventListener("click", async () => {
    const page = await ctx.api.listJobs({ status, limit: PAGE_SIZE, cursor });
    olderJobs.push(...page.jobs);
    cursor = page.next_cursor;
    more.hidden = !cursor;
    poller.stop();
    poller.start();
  });

  const filter = h(
    "select",
    {
      id: "status-filter",
      onChange: (event) => ctx.navigate(event.target.value ? `#/jobs?status=${event.target.value}` : "#/jobs"),
    },
    h("option", { value: "" }, "all"),
    STATUSES.map((s) => h("option", { value: s, selected: s === status }, s)),
  );

  const element = h(
    "section",
    { class: "jobs" },
    h(
      "div",
      { class: "toolbar" },
      heading("Jobs"),
      h("label", { for: "status-filter" }, "Status "),
      filter,
      h("a", { class: "button primary", href: "#/upload" }, "Upload documents"),
    ),
    batches.element,
    h(
      "table",
      { class: "job-table", id: "jobs" },
      h("caption", { class: "visually-hidden" }, "Your jobs, newest first"),
      h(
        "thead",
        {},
        h("tr", {}, ["Document", "Status", "Pages", "Priority", "Submitted", "Finished"].map((t) => h("th", { scope: "col" }, t))),
      ),
      tbody,
    ),
    message,
    more,
  );
  poller.start();
  return { element, stop: () => poller.stop() };
}

function fillRow(row, job) {
  const failed = job.pages_failed ? `, ${job.pages_failed} failed` : "";
  const cells = [
    h("a", { href: `#/jobs/${job.id}`, class: "job-link" }, job.source || job.id),
    statusBadge(job.status),
    [progressBar(job.pages_done, job.pages_failed, job.pages_total), ` ${job.pages_done}/${job.pages_total}${failed}`],
    job.priority,
    formatTime(job.created_at),
    formatTime(job.finished_at),
  ];
  const key = JSON.stringify([job.status, job.pages_done, job.pages_failed, job.finished_at]);
  if (row.dataset.state === key) return; // unchanged: keep the row's elements (and focus)
  row.dataset.state = key;
  row.dataset.status = job.status;
  if (!row.children.length) {
    row.replaceChildren(...cells.map(() => h("td")));
  }
  // The link cell stays as it is once made, so a focused link keeps its focus.
  if (!row.children[0].firstChild) replace(row.children[0], cells[0]);
  cells.slice(1).forEach((cell, i) => replace(row.children[i + 1], cell));
}

function emptyText(status) {
  return status ? `No ${status} jobs.` : "No jobs yet. Upload a document to start.";
}
