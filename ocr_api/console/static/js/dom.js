// Small DOM helpers. Text always goes in as text nodes (never innerHTML), so nothing the API
// returns (file names, OCR text) can become markup.

/** h("a", {href, class, onClick}, child, ...): an element with attributes, listeners, children. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2).toLowerCase(), value);
    else if (name === "class") el.className = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replace an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function statusBadge(status) {
  return h("span", { class: `badge status-${status}` }, status);
}

export function formatTime(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

export function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(0)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** Say something to screen-reader users (the page's polite live region). */
export function announce(message) {
  const region = document.getElementById("announcer");
  if (region) region.textContent = message;
}

/** An error as a visible message; ApiError carries the API's own detail. */
export function errorMessage(error) {
  return h("p", { class: "error", role: "alert" }, error.message || String(error));
}

/** A screen's title; focusable from script (tabindex -1) so a new screen can take focus. */
export function heading(...children) {
  return h("h1", { tabindex: "-1" }, ...children);
}

/** A bar of done (and failed) pages out of the total. */
export function progressBar(done, failed, total) {
  const bar = h("span", { class: "progress", role: "img" });
  bar.setAttribute("aria-label", `${done} of ${total} pages done, ${failed} failed`);
  const ok = h("span", { class: "progress-done" });
  const bad = h("span", { class: "progress-failed" });
  ok.style.width = `${total ? ((done - failed) / total) * 100 : 0}%`;
  bad.style.width = `${total ? (failed / total) * 100 : 0}%`;
  return append(bar, [ok, bad]);
}
