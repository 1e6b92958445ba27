// Upload: drop files or pick several, choose a page range and a priority, watch each upload's
// progress, then follow the jobs it made. What a set of files becomes on the API (a job, or a
// batch of several) is uploads.js's business.

import { announce, errorMessage, formatBytes, h, heading, replace } from "../dom.js";
import { planSubmissions, splitAccepted, submitAll } from "../uploads.js";

export function uploadView(ctx) {
  let files = [];
  const input = h("input", {
    type: "file",
    id: "file-input",
    multiple: true,
    accept: ".pdf,.png,.jpg,.jpeg,.tif,.tiff,application/pdf,image/png,image/jpeg,image/tiff",
  });
  const chosen = h("ul", { class: "file-list", id: "chosen-files" });
  const notes = h("div", { "aria-live": "polite" });
  const pages = h("input", { id: "pages", type: "text", placeholder: "all", pattern: "[0-9,\\- ]*", "aria-describedby": "pages-help" });
  const priority = h(
    "select",
    { id: "priority" },
    h("option", { value: "interactive", selected: true }, "interactive (someone is waiting)"),
    h("option", { value: "backlog" }, "backlog (overnight work)"),
  );
  const start = h("button", { type: "submit", id: "start-upload", class: "primary", disabled: true }, "Upload");
  const progressList = h("ul", { class: "upload-list", id: "uploads" });

  function choose(list) {
    const { accepted, refused } = splitAccepted([...list]);
    files = accepted;
    replace(chosen, files.map((file) => h("li", {}, `${file.name} (${formatBytes(file.size)})`)));
    replace(notes, refused.length ? h("p", { class: "warning" }, `Not a PDF or page image, left out: ${refused.map((f) => f.name).join(", ")}`) : null);
    start.disabled = files.length === 0;
  }

  input.addEventListener("change", () => choose(input.files));
  const drop = h(
    "div",
    { class: "dropzone", id: "dropzone" },
    h("p", {}, "Drop PDFs or page images here, or "),
    h("label", { for: "file-input", class: "file-label" }, "choose files: "),
    input,
  );
  drop.addEventListener("dragover", (event) => (event.preventDefault(), drop.classList.add("over")));
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    choose(event.dataTransfer.files);
  });

  async function onSubmit(event) {
    event.preventDefault();
    const submissions = planSubmissions(files);
    const items = new Map(submissions.map((s) => [s.id, uploadItem(s)]));
    replace(progressList, [...items.values()].map((item) => item.element));
    start.disabled = true;
    announce(`Uploading ${submissions.length} documents`);
    try {
      const batch = await submitAll(ctx.api, submissions, { pages: pages.value.trim(), priority: priority.value }, {
        onProgress: (s, sent, total) => items.get(s.id).progress(sent, total),
        onDone: (s, jobs) => items.get(s.id).done(jobs),
        onError: (s, error) => items.get(s.id).failed(error),
      });
      announce(batch ? `Uploads finished: batch ${batch.name}` : "Uploads finished");
    } catch (error) {
      replace(notes, h("p", { class: "warning", role: "alert" }, errorMessage(error)));
    }
    start.disabled = files.length === 0;
  }

  const element = h(
    "section",
    { class: "upload" },
    heading("Upload"),
    h(
      "form",
      { onSubmit, id: "upload-form" },
      drop,
      chosen,
      notes,
      h(
        "div",
        { class: "options" },
        h("label", { for: "pages" }, "Pages"),
        pages,
        h("span", { id: "pages-help", class: "hint" }, "e.g. 1-3,7; empty: every page"),
        h("label", { for: "priority" }, "Priority"),
        priority,
      ),
      h("p", { class: "hint" }, "One file is a job; several files are one batch, each file a job in it."),
      start,
    ),
    progressList,
  );
  return { element, stop() {} };
}

function uploadItem(submission) {
  const bar = h("progress", { max: "100", value: "0" });
  const state = h("span", { class: "upload-state" }, "waiting");
  const element = h("li", { class: "upload-item", dataset: { name: submission.label } }, h("span", { class: "upload-name" }, submission.label), bar, state);
  return {
    element,
    progress(sent, total) {
      bar.value = Math.round((sent / total) * 100);
      replace(state, sent < total ? `${formatBytes(sent)} of ${formatBytes(total)}` : "processing upload…");
    },
    done(jobs) {
      bar.value = 100;
      element.classList.add("uploaded");
      replace(state, jobs.map((job) => h("a", { href: `#/jobs/${job.id}`, class: "job-link" }, job.pages_total === null ? "job (in the batch)" : `job of ${job.pages_total} pages`)));
    },
    failed(error) {
      element.classList.add("upload-failed");
      replace(state, errorMessage(error));
    },
  };
}
