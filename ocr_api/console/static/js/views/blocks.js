// The page's detected blocks, twice: as boxes over the scan and as a list of their texts; and
// a search's hits on the page, as boxes of their own over the blocks.
// Boxes are placed in percent of the rendered page (bbox / (width, height)), so they stay on
// their text whatever size the image is drawn at, and whatever width it was fetched at.

import { h, replace } from "../dom.js";

export function blockLayer() {
  const image = h("img", { id: "scan-image", alt: "The page's scan" });
  const overlay = h("div", { class: "overlay", id: "overlay" });
  const hitLayer = h("div", { class: "overlay hits", id: "hit-overlay" });
  const figure = h("figure", { class: "scan", id: "scan" }, h("div", { class: "scan-frame" }, image, overlay, hitLayer));
  const list = h("ol", { class: "block-list", id: "block-list" }, h("li", { class: "hint" }, "No blocks yet."));
  let boxes = [];
  let items = [];

  function activate(index, scroll) {
    boxes.forEach((box, i) => box.classList.toggle("active", i === index));
    items.forEach((item, i) => item.classList.toggle("active", i === index));
    if (scroll && items[index] && !list.closest("[hidden]")) items[index].scrollIntoView({ block: "nearest" });
  }

  function show(result) {
    const { width, height } = result;
    const blocks = result.blocks || [];
    boxes = width && height ? blocks.map((block, i) => blockBox(block, i, width, height)) : [];
    items = blocks.map((block, i) => blockItem(block, i));
    replace(overlay, boxes);
    replace(list, items.length ? items : h("li", { class: "hint" }, "No blocks were detected on this page."));
    boxes.forEach((box, i) => {
      box.addEventListener("mouseenter", () => activate(i, true));
      box.addEventListener("mouseleave", () => activate(-1));
    });
    items.forEach((item, i) => {
      item.addEventListener("mouseenter", () => activate(i));
      item.addEventListener("mouseleave", () => activate(-1));
      item.addEventListener("focus", () => activate(i));
      item.addEventListener("blur", () => activate(-1));
    });
  }

  /** A search's matches on this page: boxes in the page's pixels (width x height). */
  function showHits(hits, width, height) {
    replace(hitLayer, width && height ? hits.map((bbox) => placed(h("div", { class: "hit" }), bbox, width, height)) : []);
  }

  return { figure, image, list, show, showHits };
}

function placed(element, [x1, y1, x2, y2], width, height) {
  element.style.left = `${(x1 / width) * 100}%`;
  element.style.top = `${(y1 / height) * 100}%`;
  element.style.width = `${((x2 - x1) / width) * 100}%`;
  element.style.height = `${((y2 - y1) / height) * 100}%`;
  return element;
}

function blockBox(block, index, width, height) {
  const box = h("div", { class: `box label-${cssName(block.label)}`, dataset: { index, label: block.label }, title: block.label });
  return placed(box, block.bbox, width, height);
}

function blockItem(block, index) {
  return h(
    "li",
    { class: `block label-${cssName(block.label)}`, tabindex: "0", dataset: { index } },
    h("span", { class: "block-label" }, block.label),
    h("span", { class: "block-text" }, block.text),
  );
}

/** A label as a class name: "figure/chart" -> "figure-chart". */
function cssName(label) {
  return String(label).toLowerCase().replace(/[^a-z0-9_-]+/g, "-");
}
