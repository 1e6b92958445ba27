// Sign-in: an API key, checked against the API before it is kept.

import { keyStore, verifyKey } from "../api.js";
import { h, replace } from "../dom.js";

export function signInView(ctx, { message = "" } = {}) {
  const input = h("input", {
    id: "api-key",
    type: "password",
    name: "api-key",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "sign-in-help",
  });
  const status = h("div", { id: "sign-in-status", "aria-live": "polite" });
  if (message) replace(status, h("p", { class: "error", role: "alert" }, message));
  const button = h("button", { type: "submit", id: "sign-in", class: "primary" }, "Sign in");

  async function onSubmit(event) {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    button.disabled = true;
    replace(status, h("p", {}, "Checking the key…"));
    try {
      await verifyKey(key);
      keyStore.set(key);
      ctx.signedIn();
    } catch (error) {
      const text = error.status === 401 ? "This key is not valid (or was revoked)." : error.message;
      replace(status, h("p", { class: "error", role: "alert" }, text));
      button.disabled = false;
      input.focus();
    }
  }

  const element = h(
    "section",
    { class: "sign-in card" },
    h("h1", {}, "Sign in"),
    h(
      "form",
      { onSubmit },
      h("label", { for: "api-key" }, "API key"),
      input,
      h(
        "p",
        { id: "sign-in-help", class: "hint" },
        "Your key stays in this tab only and is sent with each request. You see your ",
        "organisation's jobs only.",
      ),
      button,
    ),
    status,
  );
  return { element, focus: input, stop() {} };
}
