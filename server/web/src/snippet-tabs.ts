/**
 * The first-call snippets (./snippets.ts) as tabs: one code block at a time, each with its
 * copy button. The WAI-ARIA tabs pattern: the tab list is one tab stop, the arrow keys (and
 * Home, End) move between tabs and select them.
 */

import { copyButton, h } from "./dom";
import { SNIPPET_LANGUAGES, type SnippetTarget, snippet } from "./snippets";

let tabSets = 0;

/** The tabs for one target: curl selected first. */
export function snippetTabs(target: SnippetTarget): HTMLElement {
  const id = `snippets-${++tabSets}`;
  const tabs: HTMLButtonElement[] = [];
  const panels: HTMLElement[] = [];
  for (const { id: language, label } of SNIPPET_LANGUAGES) {
    const text = snippet(language, target);
    tabs.push(
      h(
        "button",
        {
          type: "button",
          role: "tab",
          id: `${id}-tab-${language}`,
          "aria-controls": `${id}-panel-${language}`,
          class: "tab",
          testid: `snippet-tab-${language}`,
        },
        label,
      ),
    );
    panels.push(
      h(
        "div",
        { role: "tabpanel", id: `${id}-panel-${language}`, "aria-labelledby": `${id}-tab-${language}`, class: "tab-panel" },
        h("div", { class: "code-head" }, h("span", {}, label), copyButton(text, { "aria-label": `Copy the ${label} snippet` })),
        h("pre", { class: "code", tabindex: 0, testid: `snippet-${language}` }, text),
      ),
    );
  }
  const select = (index: number, focus = false) => {
    tabs.forEach((tab, i) => {
      tab.setAttribute("aria-selected", String(i === index));
      tab.tabIndex = i === index ? 0 : -1;
      panels[i].hidden = i !== index;
    });
    if (focus) tabs[index].focus();
  };
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => select(i));
    tab.addEventListener("keydown", (event) => {
      const last = tabs.length - 1;
      const to = { ArrowRight: i === last ? 0 : i + 1, ArrowLeft: i === 0 ? last : i - 1, Home: 0, End: last }[event.key];
      if (to === undefined) return;
      event.preventDefault();
      select(to, true);
    });
  });
  select(0);
  return h(
    "div",
    { class: "snippets", testid: "snippets" },
    h("div", { role: "tablist", "aria-label": "Call it from", class: "tabs" }, ...tabs),
    ...panels,
  );
}
