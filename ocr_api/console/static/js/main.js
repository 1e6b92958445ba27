// The console's shell: a hash router (#/jobs, #/upload, #/review, #/search?q=, #/jobs/<id>,
// #/jobs/<id>/pages/<n>[?q=, the query whose hits it shows]),
// the signed-in state, and one view at a time. A view is {element, focus?, stop()}: stop()
// ends its polling and frees its blob URLs when the reader moves on.

import { ApiClient, keyStore } from "./api.js";
import { replace } from "./dom.js";
import { jobView } from "./views/job.js";
import { jobsView } from "./views/jobs.js";
import { pageView } from "./views/page.js";
import { reviewView } from "./views/review.js";
import { searchView } from "./views/search.js";
import { signInView } from "./views/signin.js";
import { uploadView } from "./views/upload.js";

const JOB_ID = "([0-9a-f-]{36})";
const ROUTES = [
  [new RegExp(`^#/jobs/${JOB_ID}/pages/(\\d+)(?:\\?(.*))?$`), (ctx, m) => pageView(ctx, m[1], Number(m[2]), new URLSearchParams(m[3] || "").get("q"))],
  [new RegExp(`^#/jobs/${JOB_ID}$`), (ctx, m) => jobView(ctx, m[1])],
  [/^#\/upload$/, (ctx) => uploadView(ctx)],
  [/^#\/review$/, (ctx) => reviewView(ctx)],
  [/^#\/search(?:\?(.*))?$/, (ctx, m) => searchView(ctx, new URLSearchParams(m[1] || "").get("q") || "")],
  [/^#\/jobs(?:\?(.*))?$/, (ctx, m) => jobsView(ctx, new URLSearchParams(m[1] || ""))],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
let current = null;
let signInMessage = "";

function context(key) {
  return {
    api: new ApiClient(key, { onUnauthorized: () => signOut("Your key was refused: sign in again.") }),
    navigate: (hash) => {
      if (location.hash === hash) render();
      else location.hash = hash;
    },
    signedIn: () => {
      signInMessage = "";
      location.hash === "#/jobs" ? render() : (location.hash = "#/jobs");
    },
  };
}

function signOut(message = "") {
  keyStore.clear();
  signInMessage = message;
  render();
}

function viewFor(ctx, hash) {
  for (const [pattern, make] of ROUTES) {
    const match = pattern.exec(hash);
    if (match) return make(ctx, match);
  }
  return null;
}

function render() {
  current?.stop();
  const key = keyStore.get();
  nav.hidden = !key;
  if (!key) {
    current = signInView(context(null), { message: signInMessage });
  } else {
    current = viewFor(context(key), location.hash || "#/jobs");
    if (!current) {
      location.replace("#/jobs");
      return;
    }
  }
  replace(main, current.element);
  markCurrentNav();
  // Keyboard and screen-reader users land on the new screen, not on a removed element.
  (current.focus || main.querySelector("h1") || main).focus({ preventScroll: true });
}

function markCurrentNav() {
  for (const link of nav.querySelectorAll("a")) {
    const here = location.hash.startsWith(link.getAttribute("href"));
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

document.getElementById("sign-out").addEventListener("click", () => signOut());
window.addEventListener("hashchange", render);
// A module script runs once the document is parsed.
render();
