// The API as the console uses it. Every call sends the key as "Authorization: Bearer"; the key
// lives in sessionStorage (gone when the tab closes) and never goes in a URL.

const KEY_NAME = "uocr.apiKey";

export const RESULT_FORMATS = [
  ["markdown", "Markdown"],
  ["text", "Text"],
  ["json", "JSON"],
  ["jsonl", "JSON lines"],
  ["hocr", "hOCR"],
  ["alto", "ALTO XML"],
  ["chunks", "Chunks (JSON lines)"],
  ["pdf", "Searchable PDF"],
];

export const keyStore = {
  get: () => sessionStorage.getItem(KEY_NAME),
  set: (key) => sessionStorage.setItem(KEY_NAME, key),
  clear: () => sessionStorage.removeItem(KEY_NAME),
};

/** An error answer: the API's problem details (RFC 9457) when it sent them. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function problemOf(response) {
  try {
    return await response.json();
  } catch {
    return { title: response.statusText };
  }
}

export class ApiClient {
  /** onUnauthorized() is called when the key is refused (revoked while signed in). */
  constructor(key, { onUnauthorized = () => {} } = {}) {
    this.key = key;
    this.onUnauthorized = onUnauthorized;
  }

  async request(path, { method = "GET", accept = "application/json", body, headers: extra = {} } = {}) {
    const headers = { Authorization: `Bearer ${this.key}`, Accept: accept, ...extra };
    const response = await fetch(path, { method, headers, body, cache: "no-cache" });
    if (!response.ok) {
      const error = new ApiError(response.status, await problemOf(response));
      if (response.status === 401) this.onUnauthorized(error);
      throw error;
    }
    return response;
  }

  async json(path, options) {
    return (await this.request(path, options)).json();
  }

  listJobs({ status = "", limit = 50, cursor = null } = {}) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (status) query.set("status", status);
    if (cursor) query.set("cursor", cursor);
    return this.json(`/v1/jobs?${query}`);
  }

  /** The tenant's pages to review, oldest first (docs/http-api.md, "Pages to review"). */
  pagesToReview({ limit = 100, cursor = null } = {}) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    return this.json(`/v1/review?${query}`);
  }

  /** GET /v1/search: hits best first, each with its boxes on the page's scan. Scope it to a
   * job's page with {jobId, page}. */
  search(q, { limit = 20, cursor = null, jobId = null, page = null } = {}) {
    const query = new URLSearchParams({ q, limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    if (jobId) query.set("job_id", jobId);
    if (page) query.set("page", String(page));
    return this.json(`/v1/search?${query}`);
  }

  markReviewed(jobId, pageNo) {
    return this.json(`/v1/jobs/${encodeURIComponent(jobId)}/pages/${pageNo}/reviewed`, { method: "POST" });
  }

  listBatches({ limit = 20 } = {}) {
    return this.json(`/v1/batches?limit=${limit}`);
  }

  /** The job with the pages asked: `all`, or a range `A-B` (a long document's status is
   * otherwise a summary; see docs/http-api.md). */
  getJob(jobId, pages = "all") {
    return this.json(`/v1/jobs/${encodeURIComponent(jobId)}?pages=${pages}`);
  }

  getPage(jobId, pageNo) {
    return this.json(`/v1/jobs/${encodeURIComponent(jobId)}/pages/${pageNo}`);
  }

  cancelJob(jobId) {
    return this.json(`/v1/jobs/${encodeURIComponent(jobId)}/cancel`, { method: "POST" });
  }

  /** The page's scan as a blob URL (an <img> cannot send the Authorization header). The
   * caller revokes it. The browser's cache revalidates it by ETag. */
  async pageImageUrl(jobId, pageNo, width) {
    const path = `/v1/jobs/${encodeURIComponent(jobId)}/pages/${pageNo}/image?width=${width}`;
    const response = await this.request(path, { accept: "image/jpeg" });
    return URL.createObjectURL(await response.blob());
  }

  /** A result file as a Blob and the name the API gives it. */
  async result(jobId, format) {
    const path = `/v1/jobs/${encodeURIComponent(jobId)}/result?format=${format}`;
    const response = await this.request(path, { accept: "*/*" });
    const disposition = response.headers.get("Content-Disposition") || "";
    const name = /filename="([^"]+)"/.exec(disposition)?.[1] || `${jobId}-${format}`;
    return { blob: await response.blob(), name };
  }

  /** POST /v1/jobs with one or more files as one document. XMLHttpRequest, not fetch: only
   * it reports upload progress. onProgress(sentBytes, totalBytes). */
  submitJob(files, { pages = "", priority = "interactive" } = {}, onProgress = () => {}) {
    const form = new FormData();
    for (const file of files) form.append("file", file, file.name);
    if (pages) form.append("pages", pages);
    form.append("priority", priority);
    return this.upload("/v1/jobs", form, onProgress);
  }

  /** An open batch the console's files are added to, one by one, then closed. */
  createBatch({ name, pages = "", priority = "backlog" }) {
    const body = { name, open: true, priority, ...(pages ? { pages } : {}) };
    return this.json("/v1/batches", {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" },
    });
  }

  /** One file into a batch through the API; resolves to {added, existing, job_ids}. */
  addBatchFile(batchId, file, onProgress = () => {}) {
    const form = new FormData();
    form.append("file", file, file.name);
    return this.upload(`/v1/batches/${encodeURIComponent(batchId)}/files`, form, onProgress);
  }

  closeBatch(batchId) {
    return this.json(`/v1/batches/${encodeURIComponent(batchId)}/close`, { method: "POST" });
  }

  upload(path, form, onProgress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", path);
      xhr.setRequestHeader("Authorization", `Bearer ${this.key}`);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.onprogress = (event) => {
        if (event.lengthComputable) onProgress(event.loaded, event.total);
      };
      xhr.onerror = () => reject(new Error("the upload failed: no answer from the API"));
      xhr.onload = () => {
        let body = {};
        try {
          body = JSON.parse(xhr.responseText);
        } catch {
          body = { title: xhr.statusText };
        }
        if (xhr.status >= 200 && xhr.status < 300) resolve(body);
        else {
          const error = new ApiError(xhr.status, body);
          if (xhr.status === 401) this.onUnauthorized(error);
          reject(error);
        }
      };
      xhr.send(form);
    });
  }
}

/** Checks a key before keeping it: a 401 means it is wrong or revoked. */
export async function verifyKey(key) {
  await new ApiClient(key).listJobs({ limit: 1 });
}

/** An answer that asking again will not change (no such job, deleted): polling stops. */
export function isPermanent(error) {
  return error instanceof ApiError && [404, 410].includes(error.status);
}
