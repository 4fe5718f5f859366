/**
 * The skill page's "try it" card: a real, paid call with one of the person's keys
 * (POST /v1/skills/:slug/try answers exactly what the call endpoint would).
 *
 * The input is a form built from the skill's input schema (one field per top-level property),
 * or the raw JSON, a toggle away; both start from the same example. Each attempt replaces the
 * last one entirely: a mistake in the input is said next to the form (role=alert, the field
 * marked aria-invalid) and no result is left standing; an answer shows what an agent gets:
 * the data or the error, "Charged $0.002 · balance $4.998", the latency and the call's id.
 */

import { describeError, request } from "../api";
import { card, h, monoValue, muted, replaceChildren } from "../dom";
import { formatLatency, formatUsd } from "../format";
import { inlineMarkdown } from "../rich-text";
import { type FormField, exampleInput, fieldText, formFields, readField, readInputJson } from "../schema";
import { refreshMe } from "../session";
import { type TryAnswer, dataText, formatElapsed, readTryAnswer } from "../try-answer";
import type { ApiKey, Me, Skill } from "../types";

/** How often the button's elapsed time moves while a call is in flight. */
const PROGRESS_TICK_MS = 100;

/** The keys the card offers: the list, or why there is none to offer. */
export type TryKeys = { kind: "signed_out" } | { kind: "failed"; message: string } | { kind: "loaded"; keys: ApiKey[] };

/** An input read from the form or the JSON editor, or the mistake in it and the control to fix. */
type InputReading = { ok: true; value: Record<string, unknown> } | { ok: false; message: string; control: HTMLElement };

/** The "try it" card for a skill. */
export function tryCard(skill: Skill, keys: TryKeys): HTMLElement {
  const title = "Try it";
  if (keys.kind === "signed_out")
    return card(title, h("p", {}, h("a", { href: "/signin" }, "Sign in"), " to try this skill with one of your keys."));
  if (keys.kind === "failed")
    return card(
      title,
      h("p", { class: "field-error", role: "alert" }, `Your keys could not be loaded: ${keys.message} Reload the page to try again.`),
    );
  if (keys.keys.length === 0)
    return card(
      title,
      h("p", {}, "You need an API key to try a skill. ", h("a", { href: "/keys" }, "Create one on the API Keys page"), "."),
    );
  return card(title, muted("A real call, billed to your balance like any other."), new TryForm(skill, keys.keys).element);
}

/** One field of the form on the page: its schema field and the control a person edits. */
interface Control {
  field: FormField;
  input: HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement;
}

class TryForm {
  readonly element: HTMLElement;
  private readonly controls: Control[];
  /** Properties the JSON had that the form has no field for: kept, so a round trip through the form loses nothing. */
  private extras: Record<string, unknown> = {};
  private mode: "form" | "json";
  private inFlight = false;

  private readonly keySelect: HTMLSelectElement;
  private readonly json = h("textarea", { rows: 8, spellcheck: false, class: "mono", testid: "try-input", id: "try-input" });
  private readonly jsonField: HTMLElement;
  private readonly fieldset: HTMLElement | null;
  private readonly modeButtons: { form: HTMLButtonElement; json: HTMLButtonElement } | null;
  private readonly error = h("p", { class: "field-error try-error", role: "alert", id: "try-error", testid: "try-error" });
  private readonly submit: HTMLButtonElement;
  private readonly submitLabel: HTMLElement;
  private readonly idleLabel: string;
  /** The one-line outcome, a polite live region: what a screen reader hears after each attempt. */
  private readonly summary = h("div", { class: "try-summary", role: "status", testid: "try-summary" });
  private readonly output: HTMLElement;
  private readonly body = h("div", { class: "try-body" });

  constructor(
    private readonly skill: Skill,
    keys: ApiKey[],
  ) {
    this.keySelect = h(
      "select",
      { testid: "try-key", id: "try-key" },
      ...keys.map((key) => h("option", { value: key.id }, `${key.name || "(unnamed)"} — ${key.prefix}…`)),
    );
    const fields = formFields(skill.input_schema);
    this.controls = (fields ?? []).map((field, index) => ({ field, input: controlFor(field, index) }));
    this.json.value = JSON.stringify(exampleInput(skill.input_schema), null, 2);
    // The form starts with the example; a schema whose example the form cannot show starts in JSON.
    const shown = this.controls.every(({ field, input }) => setControl(input, fieldText(field, field.initial)));
    this.mode = this.controls.length > 0 && shown ? "form" : "json";

    this.jsonField = h(
      "div",
      { class: "field" },
      h("label", { class: "field-label", for: "try-input" }, "Input (JSON)"),
      this.json,
      h("span", { class: "hint" }, "The skill's parameters as one JSON object."),
    );
    this.fieldset = this.controls.length > 0 ? this.buildFieldset() : null;
    this.modeButtons =
      this.controls.length > 0
        ? {
            form: h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "try-mode-form" }, "Form"),
            json: h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "try-mode-json" }, "JSON"),
          }
        : null;
    this.modeButtons?.form.addEventListener("click", () => this.switchTo("form"));
    this.modeButtons?.json.addEventListener("click", () => this.switchTo("json"));

    this.idleLabel = `Call for ${skill.pricing === "usage" ? "up to " : ""}${formatUsd(skill.price_per_call ?? skill.price ?? 0)}`;
    this.submitLabel = h("span", {}, this.idleLabel);
    this.submit = h("button", { type: "submit", class: "btn btn-primary", testid: "try-submit" }, this.submitLabel);

    this.output = h("div", { class: "try-output", testid: "try-output" }, this.body);
    this.output.hidden = true;

    const form = h(
      "form",
      { class: "stack", novalidate: true, "aria-label": `Try ${skill.name}` },
      h("div", { class: "field" }, h("label", { class: "field-label", for: "try-key" }, "Key"), this.keySelect),
      this.modeButtons
        ? h(
            "div",
            { class: "try-mode", role: "group", "aria-label": "Edit the input as" },
            h("span", { class: "field-label" }, "Input"),
            this.modeButtons.form,
            this.modeButtons.json,
          )
        : null,
      this.fieldset,
      this.jsonField,
      this.error,
      h("div", { class: "actions" }, this.submit),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void this.attempt();
    });
    this.element = h("div", { class: "stack" }, form, this.summary, this.output);
    this.showMode();
  }

  /** The form's fields, each with its label, required marker, description and default. */
  private buildFieldset(): HTMLElement {
    const anyRequired = this.controls.some(({ field }) => field.required);
    return h(
      "div",
      { class: "stack try-fields", testid: "try-fields" },
      anyRequired ? h("p", { class: "hint" }, "Fields marked * are required.") : null,
      ...this.controls.map(({ field, input }) => {
        const hintId = `${input.id}-hint`;
        const hints = [
          field.description ? h("span", {}, ...inlineMarkdown(field.description)) : null,
          field.defaultValue !== undefined ? h("span", {}, `Default: ${JSON.stringify(field.defaultValue)}.`) : null,
        ].filter((hint): hint is HTMLSpanElement => hint !== null);
        if (hints.length > 0) input.setAttribute("aria-describedby", hintId);
        const marker = field.required ? h("span", { class: "required", "aria-hidden": "true" }, " *") : null;
        const hint = hints.length > 0 ? h("span", { class: "hint", id: hintId }, ...joinWithSpaces(hints)) : null;
        if (field.kind === "boolean")
          return h(
            "div",
            { class: "field" },
            h("label", { class: "check", for: input.id }, input, h("span", {}, field.label), marker),
            hint,
          );
        return h(
          "div",
          { class: "field" },
          h("label", { class: "field-label", for: input.id }, field.label, marker, field.kind === "json" ? " (JSON)" : null),
          input,
          hint,
        );
      }),
    );
  }

  /** Shows the current mode's editor and marks its button pressed. */
  private showMode(): void {
    if (this.fieldset) this.fieldset.hidden = this.mode !== "form";
    this.jsonField.hidden = this.mode !== "json";
    if (this.modeButtons) {
      this.modeButtons.form.setAttribute("aria-pressed", String(this.mode === "form"));
      this.modeButtons.json.setAttribute("aria-pressed", String(this.mode === "json"));
    }
  }

  /** Moves the input from one editor to the other; a mistake in it stops the switch and is said. */
  private switchTo(mode: "form" | "json"): void {
    if (mode === this.mode) return;
    this.clearError();
    if (mode === "json") {
      const read = this.readForm();
      if (!read.ok) return this.showError(read.message, read.control);
      this.json.value = JSON.stringify(read.value, null, 2);
    } else {
      const read = readInputJson(this.json.value);
      if (!read.ok) return this.showError(read.message, this.json);
      const texts = this.controls.map(({ field }) => fieldText(field, read.value[field.name]));
      const unshown = this.controls.findIndex((_, i) => texts[i] === undefined);
      if (unshown >= 0) {
        const { field } = this.controls[unshown];
        return this.showError(
          `The form cannot show ${field.label} = ${JSON.stringify(read.value[field.name])}: edit it here, in JSON.`,
          this.json,
        );
      }
      this.controls.forEach(({ input }, i) => setControl(input, texts[i]));
      this.extras = Object.fromEntries(
        Object.entries(read.value).filter(([name]) => !this.controls.some(({ field }) => field.name === name)),
      );
    }
    this.mode = mode;
    this.showMode();
  }

  /** The input the form's fields make, the JSON's extra properties included. */
  private readForm(): InputReading {
    const input: Record<string, unknown> = { ...this.extras };
    for (const { field, input: control } of this.controls) {
      const reading = readField(field, controlText(control));
      if (!reading.ok) return { ok: false, message: reading.message, control };
      if ("value" in reading) input[field.name] = reading.value;
      else delete input[field.name];
    }
    return { ok: true, value: input };
  }

  private readInput(): InputReading {
    if (this.mode === "form") return this.readForm();
    const read = readInputJson(this.json.value);
    return read.ok ? read : { ok: false, message: read.message, control: this.json };
  }

  /** One attempt: everything the last one showed goes first, then the input is read, then the call is made. */
  private async attempt(): Promise<void> {
    if (this.inFlight) return;
    this.clearError();
    this.clearResult();
    const read = this.readInput();
    if (!read.ok) return this.showError(read.message, read.control);

    this.inFlight = true;
    this.submit.disabled = true;
    this.submit.classList.add("is-busy");
    this.summary.textContent = `Calling ${this.skill.name}…`;
    const startedAt = performance.now();
    const spinner = h("span", { class: "spinner", "aria-hidden": "true" });
    const tick = () => (this.submitLabel.textContent = `Calling… ${formatElapsed(performance.now() - startedAt)}`);
    this.submit.prepend(spinner);
    tick();
    const timer = setInterval(tick, PROGRESS_TICK_MS);
    let answer: TryAnswer;
    let raw: unknown;
    try {
      const response = await request("POST", `/v1/skills/${encodeURIComponent(this.skill.slug)}/try`, {
        key_id: this.keySelect.value,
        input: read.value,
      });
      raw = response.body;
      answer = readTryAnswer(response.status, response.body, response.headers.get("x-call-id"));
    } catch (error) {
      answer = { ok: false, status: 0, message: describeError(error), costUsd: 0 };
    }
    const roundTripMs = performance.now() - startedAt;
    // The balance after the call, as the header's pill shows it: a paid call moved it.
    const me = await refreshMe().catch(() => null);
    clearInterval(timer);
    spinner.remove();
    this.submitLabel.textContent = this.idleLabel;
    this.submit.classList.remove("is-busy");
    this.submit.disabled = false;
    this.inFlight = false;
    this.showResult(answer, raw, me, roundTripMs);
  }

  private clearError(): void {
    this.error.textContent = "";
    for (const control of [this.json, ...this.controls.map(({ input }) => input)]) {
      control.removeAttribute("aria-invalid");
      const described = (control.getAttribute("aria-describedby") ?? "").split(" ").filter((id) => id && id !== this.error.id);
      if (described.length > 0) control.setAttribute("aria-describedby", described.join(" "));
      else control.removeAttribute("aria-describedby");
    }
  }

  private clearResult(): void {
    this.summary.textContent = "";
    this.body.replaceChildren();
    this.output.hidden = true;
  }

  /** Says what is wrong with the input next to the form, marks the control, puts the cursor there, and keeps it in view. */
  private showError(message: string, control: HTMLElement): void {
    this.error.textContent = message;
    control.setAttribute("aria-invalid", "true");
    const described = (control.getAttribute("aria-describedby") ?? "").split(" ").filter(Boolean);
    control.setAttribute("aria-describedby", [...described, this.error.id].join(" "));
    control.focus({ preventScroll: true });
    control.scrollIntoView({ block: "nearest" });
    this.error.scrollIntoView({ block: "nearest" });
  }

  /** Shows one answer: the outcome line (status, charge and balance, latency, call id), then the data or the error. */
  private showResult(answer: TryAnswer, raw: unknown, me: Me | null, roundTripMs: number): void {
    // Without an answer the call may still have run: what it cost is in Usage, not guessed here.
    const charged =
      answer.status === 0 ? "Charge unknown (see Usage)" : answer.costUsd > 0 ? `Charged ${formatUsd(answer.costUsd)}` : "Not charged";
    const balance = me ? ` · balance ${formatUsd(me.balance.available, me.balance.available_base_units)}` : "";
    const latency = answer.latencyMs !== undefined ? `${formatLatency(answer.latencyMs)}` : `${formatLatency(roundTripMs)} round trip`;
    const status = answer.status === 0 ? "No answer" : `HTTP ${answer.status}`;
    replaceChildren(
      this.summary,
      h("span", { class: `badge ${answer.ok ? "badge-ok" : "badge-bad"}`, testid: "try-status" }, status),
      h("span", { testid: "try-charge" }, charged + balance),
      h("span", {}, h("span", { class: "muted" }, "Latency "), h("span", { testid: "try-latency" }, latency)),
      answer.callId ? h("span", { class: "try-call-id" }, "Call ", monoValue(answer.callId, { testid: "try-call-id" })) : null,
    );

    if (answer.ok) {
      replaceChildren(
        this.body,
        h("div", { class: "code-head" }, h("span", {}, "Data")),
        h("pre", { class: "code code-wrap", testid: "try-result" }, dataText(answer.data)),
      );
    } else {
      replaceChildren(
        this.body,
        h("p", { class: "try-message", testid: "try-result" }, answer.message ?? ""),
        answer.status === 402 ? paymentHelp(answer.code) : null,
      );
    }
    if (raw !== undefined)
      this.body.append(
        h(
          "details",
          { class: "try-raw" },
          h("summary", {}, "Full response"),
          h("pre", { class: "code code-wrap", testid: "try-raw" }, typeof raw === "string" ? raw : JSON.stringify(raw, null, 2)),
        ),
      );
    this.output.hidden = false;
    this.summary.scrollIntoView({ block: "nearest" });
  }
}

/** Where to go after a 402: the Wallet to top up, and for a key's own limit the API Keys page too. */
function paymentHelp(code: string | undefined): HTMLElement {
  return h(
    "p",
    { class: "try-help" },
    code === "key_spend_limit_reached"
      ? h("span", {}, h("a", { href: "/keys", testid: "try-keys-link" }, "Raise this key's limit on the API Keys page"), " or ")
      : null,
    h("a", { href: "/wallet", testid: "try-wallet-link" }, "Top up your balance on the Wallet page"),
    ".",
  );
}

/** The input control for a field. */
function controlFor(field: FormField, index: number): Control["input"] {
  const props = {
    id: `try-field-${index}`,
    testid: `try-field-${field.name}`,
    name: field.name,
    "aria-required": field.required ? "true" : undefined,
  };
  switch (field.kind) {
    case "boolean":
      return h("input", { ...props, type: "checkbox", class: "checkbox" });
    case "choice":
      return h(
        "select",
        props,
        field.required ? null : h("option", { value: "" }, "(none)"),
        ...(field.options ?? []).map((option, i) =>
          h("option", { value: String(i) }, typeof option === "string" ? option : JSON.stringify(option)),
        ),
      );
    case "json":
      return h("textarea", { ...props, rows: 3, spellcheck: false, class: "mono" });
    case "text":
      return field.multiline ? h("textarea", { ...props, rows: 3 }) : h("input", { ...props, type: "text", autocomplete: "off" });
    case "number":
    case "integer":
      return h("input", {
        ...props,
        type: "text",
        inputmode: field.kind === "integer" ? "numeric" : "decimal",
        autocomplete: "off",
        class: "mono",
      });
  }
}

/** What a control holds, as `readField` reads it. */
function controlText(input: Control["input"]): string {
  return input instanceof HTMLInputElement && input.type === "checkbox" ? String(input.checked) : input.value;
}

/** Puts a value's text (from `fieldText`) in a control; false when there is none (the form cannot show the value). */
function setControl(input: Control["input"], text: string | undefined): boolean {
  if (text === undefined) return false;
  if (input instanceof HTMLInputElement && input.type === "checkbox") input.checked = text === "true";
  else input.value = text;
  return true;
}

/** Nodes with a space between each. */
function joinWithSpaces(nodes: Node[]): Node[] {
  return nodes.flatMap((node, i) => (i === 0 ? [node] : [document.createTextNode(" "), node]));
}
