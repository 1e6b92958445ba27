// Accessible tabs (WAI-ARIA tabs pattern): arrow keys move between tabs, Tab enters the panel.

import { h } from "../dom.js";

/** tabs(id, [[key, label, panelContent], ...]) -> an element; the first tab is selected. */
export function tabs(id, entries) {
  const list = h("div", { role: "tablist", class: "tablist", "aria-label": "Page content" });
  const buttons = [];
  const panels = [];
  entries.forEach(([key, label, content], index) => {
    const button = h("button", {
      type: "button",
      role: "tab",
      id: `${id}-${key}-tab`,
      "aria-controls": `${id}-${key}`,
      dataset: { tab: key },
    }, label);
    const panel = h("div", { role: "tabpanel", id: `${id}-${key}`, "aria-labelledby": button.id, tabindex: "0", class: "tabpanel" }, content);
    button.addEventListener("click", () => select(index));
    buttons.push(button);
    panels.push(panel);
    list.append(button);
  });

  function select(index, focus = false) {
    buttons.forEach((button, i) => {
      button.setAttribute("aria-selected", String(i === index));
      button.tabIndex = i === index ? 0 : -1;
      panels[i].hidden = i !== index;
    });
    if (focus) buttons[index].focus();
  }

  list.addEventListener("keydown", (event) => {
    const index = buttons.indexOf(document.activeElement);
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (index < 0 || step === undefined) return;
    event.preventDefault();
    select((index + step + buttons.length) % buttons.length, true);
  });
  select(0);
  return h("div", { class: "tabs", id }, list, panels);
}
