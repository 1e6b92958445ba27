// One job: its pages as a grid that fills in as page groups finish (polling GET /v1/jobs/{id}),
// each page's errors and warnings, cancel, and a download of each result format.

import { RESULT_FORMATS, isPermanent } from "../api.js";
import { announce, errorMessage, formatTime, h, heading, progressBar, replace, statusBadge } from "../dom.js";
import { Poller } from "../poller.js";

const POLL_MS = 1000;
const TERMINAL = new Set(["succeeded", "failed", "canceled"]);
// A long document's grid is drawn from every page once, then each poll asks only this many
// pages from the first one not yet settled (where the groups are running): a 3,000-page book
// polled every second would otherwise move every page's row each time. Once the job ends,
// every page is asked once more, so no cell outside the last window stays behind.
const WINDOW = 300;

export function jobView(ctx, jobId) {
  const title = heading("Job");
  const summary = h("div", { class: "job-summary", id: "job-summary", "aria-live": "polite" });
  const grid = h("ol", { class: "page-grid", id: "page-grid", "aria-label": "Pages" });
  const issues = h("div", { class: "page-issues", id: "page-issues" });
  const message = h("div", { id: "job-message" });
  const cancel = h("button", { type: "button", id: "cancel-job", class: "danger", hidden: true }, "Cancel job");
  const downloads = h("div", { class: "downloads", id: "downloads" });
  const cells = new Map(); // page number -> <a>
  const pages = new Map(); // page number -> the page as last listed
  let asked = "all";
  let finished = false;

  const poller = new Poller(
    async () => {
      const job = await ctx.api.getJob(jobId, asked);
      for (const page of job.pages) pages.set(page.page, page);
      const ended = TERMINAL.has(job.status);
      const lastLook = ended && asked !== "all"; // every page once more before the end
      asked = ended || job.pages_total <= WINDOW ? "all" : windowFrom(pages);
      show(job);
      return !ended || lastLook;
    },
    POLL_MS,
    (error) => {
      replace(message, errorMessage(error));
      return !isPermanent(error);
    },
  );

  function show(job) {
    replace(title, job.source || "Job");
    replace(summary, jobSummary(job));
    cancel.hidden = TERMINAL.has(job.status);
    cancel.disabled = job.cancel_requested;
    if (job.cancel_requested && !TERMINAL.has(job.status)) cancel.textContent = "Canceling after the current pages…";
    for (const page of job.pages) updateCell(shownPage(job, page));
    replace(issues, pageIssues(jobId, [...pages.values()]));
    if (TERMINAL.has(job.status) && !finished) {
      finished = true;
      announce(`The job ${job.status}`);
      replace(downloads, downloadButtons(ctx, job, message));
    }
  }

  function updateCell(page) {
    let cell = cells.get(page.page);
    if (!cell) {
      cell = h("a", { class: "page-cell", href: `#/jobs/${jobId}/pages/${page.page}`, dataset: { page: page.page } });
      cells.set(page.page, cell);
      grid.append(h("li", {}, cell));
    }
    if (cell.dataset.status === page.status && cell.dataset.flags === String(page.warnings.length)) return;
    cell.dataset.status = page.status;
    cell.dataset.flags = String(page.warnings.length);
    cell.className = `page-cell status-${page.status}${page.warnings.length ? " has-warnings" : ""}`;
    const detail = [page.status, ...page.warnings, page.error].filter(Boolean).join(", ");
    cell.setAttribute("aria-label", `Page ${page.page}: ${detail}`);
    cell.title = `Page ${page.page}: ${detail}`;
    replace(cell, h("span", { class: "page-no" }, page.page), page.warnings.length ? h("span", { class: "flag", "aria-hidden": "true" }, "!") : null);
  }

  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      await ctx.api.cancelJob(jobId);
      announce("Cancel requested");
    } catch (error) {
      replace(message, errorMessage(error));
    }
    poller.stop();
    poller.start();
  });
  grid.addEventListener("keydown", (event) => moveInGrid(grid, event));

  const element = h(
    "section",
    { class: "job" },
    h("p", { class: "breadcrumbs" }, h("a", { href: "#/jobs" }, "Jobs"), " / job ", h("code", {}, jobId)),
    h("div", { class: "toolbar" }, title, cancel),
    summary,
    message,
    h("h2", {}, "Pages"),
    h("p", { class: "hint" }, "Pages fill in as each group of pages finishes. Arrow keys move between pages; Enter opens one."),
    grid,
    issues,
    h("h2", {}, "Download"),
    downloads,
  );
  replace(downloads, h("p", { class: "hint" }, "The results can be downloaded once the job has finished."));
  poller.start();
  return { element, focus: title, stop: () => poller.stop() };
}

/** The WINDOW pages from the first one still pending or running, as a range to ask for. */
function windowFrom(pages) {
  let first = Infinity;
  for (const page of pages.values()) {
    if ((page.status === "pending" || page.status === "running") && page.page < first) first = page.page;
  }
  if (first === Infinity) first = 1;
  return `${first}-${first + WINDOW - 1}`;
}

/** A canceled job's pages that never ran are listed as pending by the API: shown canceled. */
function shownPage(job, page) {
  return job.status === "canceled" && page.status === "pending" ? { ...page, status: "canceled" } : page;
}

function jobSummary(job) {
  const failed = job.pages_failed ? `, ${job.pages_failed} failed` : "";
  const groups = job.groups_total ? ` · page groups: ${job.groups_done} of ${job.groups_total} done` : "";
  const finished = job.finished_at ? ` · finished ${formatTime(job.finished_at)}` : "";
  return [
    h(
      "p",
      { class: "counts" },
      statusBadge(job.status),
      progressBar(job.pages_done, job.pages_failed, job.pages_total),
      h("span", { id: "pages-done" }, `${job.pages_done} of ${job.pages_total} pages done${failed}${groups}`),
    ),
    h("p", { class: "hint" }, `${job.priority} priority · submitted ${formatTime(job.created_at)}${finished}`),
    job.error ? h("p", { class: "error" }, job.error) : null,
  ];
}

function pageIssues(jobId, pages) {
  const flagged = pages.filter((page) => page.error || page.warnings.length);
  if (!flagged.length) return null;
  return [
    h("h2", {}, "Errors and warnings"),
    h(
      "ul",
      { class: "issue-list" },
      flagged.map((page) =>
        h(
          "li",
          { class: page.error ? "error" : "warning" },
          h("a", { href: `#/jobs/${jobId}/pages/${page.page}` }, `Page ${page.page}`),
          ": ",
          [page.error, ...page.warnings.map((w) => w.replaceAll("_", " "))].filter(Boolean).join("; "),
        ),
      ),
    ),
  ];
}

function downloadButtons(ctx, job, message) {
  if (!job.pages_done) return h("p", { class: "hint" }, "No page was processed: there is nothing to download.");
  return RESULT_FORMATS.map(([format, label]) =>
    h("button", { type: "button", dataset: { format }, onClick: (event) => download(ctx, job.id, format, event.currentTarget, message) }, label),
  );
}

/** fetch (with the key) into a blob URL and click a link to it: a plain link cannot send
 * the Authorization header, and the key never goes in a URL. */
async function download(ctx, jobId, format, button, message) {
  button.disabled = true;
  try {
    const { blob, name } = await ctx.api.result(jobId, format);
    const url = URL.createObjectURL(blob);
    const link = h("a", { href: url, download: name, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000); // the download has its bytes by then
  } catch (error) {
    replace(message, errorMessage(error));
  } finally {
    button.disabled = false;
  }
}

/** Arrow keys move focus between page cells (up and down by a row of the grid). */
function moveInGrid(grid, event) {
  const cells = [...grid.querySelectorAll(".page-cell")];
  const index = cells.indexOf(document.activeElement);
  if (index < 0) return;
  const perRow = Math.max(1, getComputedStyle(grid).gridTemplateColumns.split(" ").length);
  const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: perRow, ArrowUp: -perRow, Home: -index, End: cells.length - 1 - index }[event.key];
  if (step === undefined) return;
  event.preventDefault();
  cells[Math.min(cells.length - 1, Math.max(0, index + step))].focus();
}
