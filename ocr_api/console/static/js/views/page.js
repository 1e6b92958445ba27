// One page: its scan with the detected blocks drawn on it, beside its text and Markdown.
// Hovering (or focusing) a block highlights both its box and its text. Arrow keys and the
// previous/next links move through the job's pages. Opened from a search (?q=), the query's
// matches on the page are drawn on the scan too.

import { isPermanent } from "../api.js";
import { errorMessage, h, heading, replace, statusBadge } from "../dom.js";
import { Poller } from "../poller.js";
import { blockLayer } from "./blocks.js";
import { tabs } from "./tabs.js";

const SCAN_WIDTH = 1400; // pixels asked for: sharp in a ~700 px column on a 2x screen
const POLL_MS = 1500;
const SETTLED = new Set(["succeeded", "failed", "canceled"]);

export function pageView(ctx, jobId, pageNo, q = null) {
  const title = heading(`Page ${pageNo}`);
  const crumbs = h("p", { class: "breadcrumbs" }, h("a", { href: "#/jobs" }, "Jobs"), " / ", h("a", { href: `#/jobs/${jobId}` }, "job"), ` / page ${pageNo}`);
  const pager = h("nav", { class: "pager", "aria-label": "Pages of this job" });
  const state = h("div", { class: "page-state", id: "page-state", "aria-live": "polite" });
  const layer = blockLayer();
  const textPanel = h("pre", { class: "page-text", id: "page-text" });
  const markdownPanel = h("pre", { class: "page-markdown", id: "page-markdown" });
  const panels = tabs("page-tabs", [
    ["blocks", "Blocks", layer.list],
    ["text", "Text", textPanel],
    ["markdown", "Markdown", markdownPanel],
  ]);
  let imageUrl = null;
  let stopped = false;

  const poller = new Poller(
    async () => {
      const job = await ctx.api.getJob(jobId);
      const page = job.pages.find((p) => p.page === pageNo);
      if (!page) {
        replace(state, h("p", { class: "error", role: "alert" }, `This job has no page ${pageNo}.`));
        return false;
      }
      replace(title, `Page ${pageNo} `, h("span", { class: "of" }, `of ${job.source}`));
      replace(pager, pagerLinks(jobId, job.pages, pageNo));
      replace(state, statusBadge(page.status), pageNotes(page));
      if (!SETTLED.has(page.status)) return true; // its group has not finished: ask again
      if (page.status !== "canceled") await showResult(page);
      return false;
    },
    POLL_MS,
    (error) => {
      replace(state, errorMessage(error));
      return !isPermanent(error);
    },
  );

  async function showResult(page) {
    try {
      const result = await ctx.api.getPage(jobId, pageNo);
      textPanel.textContent = result.text || "(no text)";
      markdownPanel.textContent = result.markdown || "(no Markdown)";
      layer.show(result);
      if (q) await showHits();
      if (result.error && !page.error) state.append(h("p", { class: "error", role: "alert" }, result.error));
    } catch (error) {
      state.append(errorMessage(error));
    }
  }

  async function showHits() {
    const [hit] = (await ctx.api.search(q, { jobId, page: pageNo, limit: 1 })).hits;
    const boxes = hit ? hit.boxes : [];
    if (hit) layer.showHits(boxes, hit.width, hit.height);
    const found = boxes.length === 1 ? "1 match" : `${boxes.length} matches`;
    state.append(h("p", { class: "hint", id: "hit-summary" }, `${found} for “${q}” on this page`, " · ", h("a", { href: `#/search?${new URLSearchParams({ q })}` }, "back to the search")));
  }

  async function loadScan() {
    try {
      const url = await ctx.api.pageImageUrl(jobId, pageNo, SCAN_WIDTH);
      if (stopped) return URL.revokeObjectURL(url);
      imageUrl = url;
      layer.image.src = url;
    } catch (error) {
      replace(layer.figure, errorMessage(error));
    }
  }

  function onKey(event) {
    const target = event.target;
    if (target.closest("input, select, textarea, [role=tab]") || event.altKey || event.ctrlKey || event.metaKey) return;
    const link = { ArrowLeft: "#prev-page", ArrowRight: "#next-page" }[event.key];
    const href = link && pager.querySelector(link)?.getAttribute("href");
    if (href) (event.preventDefault(), ctx.navigate(href));
  }
  document.addEventListener("keydown", onKey);

  const element = h(
    "section",
    { class: "page" },
    crumbs,
    h("div", { class: "toolbar" }, title, pager),
    state,
    h("div", { class: "page-columns" }, layer.figure, h("div", { class: "page-side" }, panels)),
  );
  loadScan();
  poller.start();
  return {
    element,
    focus: title,
    stop() {
      stopped = true;
      poller.stop();
      document.removeEventListener("keydown", onKey);
      if (imageUrl) URL.revokeObjectURL(imageUrl);
    },
  };
}

function pagerLinks(jobId, pages, pageNo) {
  const index = pages.findIndex((p) => p.page === pageNo);
  const prev = pages[index - 1];
  const next = pages[index + 1];
  const link = (page, id, text) =>
    page ? h("a", { id, class: "button", href: `#/jobs/${jobId}/pages/${page.page}` }, text) : h("span", { id, class: "button disabled", "aria-disabled": "true" }, text);
  return [link(prev, "prev-page", "← Previous"), h("span", { class: "position" }, ` ${index + 1} / ${pages.length} `), link(next, "next-page", "Next →")];
}

function pageNotes(page) {
  const notes = [];
  if (page.status === "failed") notes.push(h("p", { class: "error", role: "alert", id: "page-error" }, `This page failed: ${page.error || "no reason recorded"}`));
  if (page.status === "canceled") notes.push(h("p", { class: "warning" }, "This page was canceled with its job before it ran."));
  if (!SETTLED.has(page.status)) notes.push(h("p", { class: "hint" }, "Its text appears here when its page group finishes."));
  if (page.warnings.length) notes.push(h("ul", { class: "warnings", id: "page-warnings" }, page.warnings.map((w) => h("li", { class: "warning" }, w.replaceAll("_", " ")))));
  return notes;
}
