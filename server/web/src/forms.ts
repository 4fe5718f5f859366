/**
 * Form errors where the eye is: under the field that caused them, in view, read out by screen
 * readers. One error style per form: the browser's own validation bubbles are switched off
 * (`novalidate`) and no form error goes to the page's top banner. A field's constraint is
 * stated beside it (the hint) before anyone gets it wrong; its error replaces nothing, it is
 * added under the hint.
 *
 *   const amount = h("input", { testid: "card-amount" });
 *   const form = validatedForm({ testid: "card-form" }, formField("Amount", amount, "From $1.00 to $10,000.00"), submit);
 *   fieldError(amount, "Enter an amount.");           // under the field, focused, scrolled into view
 *   formError(form, error, [[/amount|deposit/i, amount]]);  // an API refusal, under the field it names
 */

import { ApiFailure, describeError } from "./api";
import { type Child, type Props, h } from "./dom";
import { sentence } from "./format";

/** A control a field can hold. */
export type Control = HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement;

let lastId = 0;
/** An id unique in the page, for aria-describedby. */
function uniqueId(prefix: string): string {
  return `${prefix}-${++lastId}`;
}

/** Each control's error line, made by formField. */
const errorLines = new WeakMap<Element, HTMLElement>();

/** The error line of a form as a whole (what no field caused), made by validatedForm. */
const formLines = new WeakMap<HTMLFormElement, HTMLElement>();

/**
 * An error line: a live region (role=alert) that is in the page before any error, so filling it is announced.
 * A field's is a span (a <label> holds phrasing content only), a form's a paragraph.
 */
function errorLine(tag: "span" | "p", testid: string | undefined): HTMLElement {
  return h(tag, { class: "field-error", id: uniqueId("error"), role: "alert", testid });
}

/**
 * A label with its control, the constraint stated under it (`hint`), and the line its error
 * will appear on. The control is described by both (aria-describedby). The error line's
 * data-testid is the control's own plus "-error".
 */
export function formField(label: string, control: Control, hint?: string): HTMLElement {
  const hintLine = hint ? h("span", { class: "hint", id: uniqueId("hint") }, hint) : null;
  const error = errorLine("span", control.dataset.testid ? `${control.dataset.testid}-error` : undefined);
  errorLines.set(control, error);
  control.setAttribute("aria-describedby", [hintLine?.id, error.id].filter(Boolean).join(" "));
  return h("label", { class: "field" }, h("span", { class: "field-label" }, label), control, hintLine, error);
}

/**
 * A form that validates itself: `novalidate` (the browser shows none of its bubbles), and a
 * form-level error line at its end (data-testid `<form testid>-error`). Typing in a field
 * clears that field's error.
 */
export function validatedForm(props: Props, ...children: Child[]): HTMLFormElement {
  const testid = typeof props.testid === "string" ? `${props.testid}-error` : undefined;
  const line = errorLine("p", testid);
  const form = h("form", { ...props, novalidate: true }, ...children, line);
  formLines.set(form, line);
  form.addEventListener("input", (event) => {
    const target = event.target as Element | null;
    if (target && errorLines.has(target)) setError(target as Control, "");
  });
  return form;
}

function setError(control: Control, message: string): void {
  const line = errorLines.get(control);
  if (!line) return;
  line.textContent = message === "" ? "" : sentence(message);
  if (message === "") control.removeAttribute("aria-invalid");
  else control.setAttribute("aria-invalid", "true");
}

/** Brings an element into view if it is not: a message nobody sees did not happen. */
export function reveal(element: HTMLElement): void {
  const box = element.getBoundingClientRect();
  if (box.top < 0 || box.bottom > window.innerHeight) element.scrollIntoView({ block: "center" });
}

/** A button in an inline form, lined up with the fields' inputs: an empty label row above it, as the fields have. */
export function formAction(button: HTMLButtonElement): HTMLElement {
  return h("div", { class: "field field-action" }, h("span", { class: "field-label", "aria-hidden": "true" }, "\u00a0"), button);
}

/** Shows an error under one field: marks it invalid, focuses it, and brings the message into view. */
export function fieldError(control: Control, message: string): void {
  setError(control, message);
  control.focus({ preventScroll: true });
  const line = errorLines.get(control);
  if (line) reveal(line);
}

/** Clears every error of the form: its fields' and its own. */
export function clearErrors(form: HTMLFormElement): void {
  for (const control of form.querySelectorAll<Control>("input, textarea, select")) setError(control, "");
  const line = formLines.get(form);
  if (line) line.textContent = "";
}

/**
 * The way forward from a 402 (the balance or a key's spending limit does not cover the call): a link to the Wallet,
 * where the balance is topped up. Null on the Wallet page itself, and for any other error.
 */
export function walletLinkFor(error: unknown): HTMLElement | null {
  if (!(error instanceof ApiFailure) || error.status !== 402 || location.pathname === "/wallet") return null;
  return walletLink();
}

/** A link to the Wallet page, to top up. */
export function walletLink(): HTMLElement {
  return h("a", { href: "/wallet", class: "wallet-link", testid: "wallet-link" }, "Top up on the Wallet page");
}

/**
 * Shows an error the form's action met (an API refusal, a wallet's refusal, a sentence): under
 * the first field whose pattern matches the message, else on the form's own line, in view.
 */
export function formError(form: HTMLFormElement, error: unknown, fields: readonly (readonly [RegExp, Control])[] = []): void {
  const message = typeof error === "string" ? error : describeError(error);
  const match = fields.find(([pattern]) => pattern.test(message));
  const line = match ? errorLines.get(match[1]) : formLines.get(form);
  if (match) fieldError(match[1], message);
  else if (line) line.textContent = sentence(message);
  if (!line) return;
  const link = walletLinkFor(error);
  if (link) line.append(" ", link);
  reveal(line);
}
