/**
 * Tiny DOM helpers. Every piece of API data enters the page as text (textContent or an
 * attribute), never as HTML: a skill's description is written by a stranger.
 */

import { middleEllipsis } from "./format";

export type Child = Node | string | number | null | undefined | false;
type Handler = (event: Event) => void;
export type Props = { [name: string]: string | number | boolean | Handler | undefined | null };

/**
 * Creates an element. Props: `class`, `testid` (data-testid), `onclick`-style handlers, and
 * any other attribute; `false`/null/undefined leave an attribute out, `true` sets it empty.
 */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === "function") element.addEventListener(name.replace(/^on/, ""), value);
    else if (name === "testid") element.dataset.testid = String(value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, ...children);
  return element;
}

/** Appends children, strings as text nodes. */
export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
}

/** Removes every child and appends the new ones. */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, ...children);
}

/** Copies text to the clipboard; falls back to a selected textarea where the Clipboard API is missing. */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = h("textarea", { class: "offscreen", readonly: true });
    area.value = text;
    document.body.appendChild(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

/** A "Copy" button that copies `text` and says so for a moment. */
export function copyButton(text: string, props: Props = {}, label = "Copy"): HTMLButtonElement {
  const button = h("button", { type: "button", class: "btn btn-small btn-ghost", ...props }, label);
  button.addEventListener("click", async () => {
    const ok = await copyText(text);
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => (button.textContent = label), 1500);
  });
  return button;
}

/** A long value (address, key, hash) in monospace, shortened in the middle; hover shows it, copy copies it all. */
export function monoValue(value: string, props: Props = {}, options: { copy?: boolean; head?: number; tail?: number } = {}): HTMLElement {
  const text = h("code", { class: "mono", title: value, ...props }, middleEllipsis(value, options.head ?? 8, options.tail ?? 6));
  // The full value rides along for tests and screen readers; the display stays short.
  text.dataset.value = value;
  return options.copy === false ? text : h("span", { class: "mono-wrap" }, text, copyButton(value, { "aria-label": "Copy full value" }));
}

/** A table in a horizontally scrolling box, so wide tables never widen a phone's page. */
export function table(props: Props, headers: string[], rows: HTMLTableRowElement[]): HTMLElement {
  return h(
    "div",
    { class: "table-scroll" },
    h("table", props, h("thead", {}, h("tr", {}, ...headers.map((label) => h("th", { scope: "col" }, label)))), h("tbody", {}, ...rows)),
  );
}

/** One table row of cells; each cell gets its column's label for the stacked phone layout. */
export function row(props: Props, headers: string[], cells: Child[]): HTMLTableRowElement {
  return h("tr", props, ...cells.map((cell, i) => h("td", { "data-label": headers[i] ?? "" }, cell)));
}

/** A card: a titled box. */
export function card(title: string | null, ...children: Child[]): HTMLElement {
  return h("section", { class: "card" }, title ? h("h2", {}, title) : null, ...children);
}

/** A muted placeholder line: loading and empty states. */
export function muted(text: string, props: Props = {}): HTMLElement {
  return h("p", { class: "muted", ...props }, text);
}

/** A label with its input, stacked. */
export function field(label: string, input: HTMLElement, hint?: string): HTMLElement {
  return h(
    "label",
    { class: "field" },
    h("span", { class: "field-label" }, label),
    input,
    hint ? h("span", { class: "hint" }, hint) : null,
  );
}

/**
 * Disables a button while an action runs, so a double click does not send twice; with `label`, the button says
 * what is happening ("Saving…") meanwhile, and gets its own words back after, unless the action renamed it.
 */
export async function busy<T>(button: HTMLButtonElement, action: () => Promise<T>, label?: string): Promise<T> {
  const original = button.textContent;
  button.disabled = true;
  button.classList.add("is-busy");
  if (label !== undefined) button.textContent = label;
  try {
    return await action();
  } finally {
    button.disabled = false;
    button.classList.remove("is-busy");
    if (label !== undefined && button.textContent === label) button.textContent = original;
  }
}

/**
 * A status word in a colored badge, one color per meaning on every page: done green, failed red, waiting amber.
 * The tone is the status word's, whatever precedes it ("#3 settled" is settled); a call's failure outcomes
 * (skill_error, insufficient_balance, spend_limit_reached, ...) are failures.
 */
export function statusBadge(status: string): HTMLElement {
  const word = status.replace(/^#\d+\s+/, "");
  const tone = /^(success|settled|paid|funded|credited|confirmed|claimed|redeemed|listed)$/.test(word)
    ? "ok"
    : /^(failed|declined|expired|abandoned|revoked|unlisted|cancelled)$/.test(word) ||
        /error|insufficient|limit|refused|forbidden|timeout|invalid|unreachable|rejected|not_found|unavailable|too_large/.test(word)
      ? "bad"
      : "wait";
  return h("span", { class: `badge badge-${tone}` }, status.replace(/_/g, " "));
}
