/**
 * What a key may do and what it is for, on the API Keys page (./keys.ts): the fields for its scopes, the skills it
 * may call, its expiry and its metadata, on the create form and in the "Edit…" dialog (PATCH /v1/keys/:id), and the
 * lines under a key's name that show them. The gateway decides (docs/keys.md); these fields say what is asked, and
 * put its refusals under the field they name.
 */

import { busy, h } from "../dom";
import { type Control, clearErrors, fieldError, formError, formField, validatedForm } from "../forms";
import { formatDateTime } from "../format";
import {
  SCOPE_CHOICES,
  dayOfExpiry,
  expiryOfDay,
  metadataLines,
  metadataSummary,
  parseMetadataLines,
  parseSkillList,
  skillListText,
} from "../key-fields";
import type { ApiKey } from "../types";

/** The access and metadata fields of one form, and what they ask for. */
export interface AccessFields {
  /** The fields, to place in the form. */
  elements: HTMLElement[];
  /**
   * What the fields ask for, as the API's body fields: all of them for a new key, only those that differ from the
   * key's for an edit. A problem the page can tell before asking is shown under its field (a scope's, on `form`'s own
   * line): null then.
   */
  read(form: HTMLFormElement): Record<string, unknown> | null;
  /** Where the gateway's refusals go: the field whose name they mention. */
  errorFields: [RegExp, Control][];
  /** Back to a new key's defaults (calls alone, every skill, never expires, no metadata). */
  reset(): void;
}

/** Scope checkbox ids: create-scope-calls, create-scope-usage-read, ... */
const scopeTestid = (prefix: string, scope: string) => `${prefix}-scope-${scope.replace(":", "-")}`;

/** The fields, testids prefixed by `prefix` ("create" on the create form, "edit" in the dialog), filled from `key` if given. */
export function accessFields(prefix: string, key?: ApiKey): AccessFields {
  const initial = {
    scopes: key?.scopes ?? ["calls"],
    skills: skillListText(key?.allowed_skills ?? null),
    day: dayOfExpiry(key?.expires_at ?? null),
    metadata: metadataLines(key?.metadata ?? {}),
  };
  const boxes = SCOPE_CHOICES.map(({ scope }) => {
    const box = h("input", { type: "checkbox", class: "checkbox", value: scope, testid: scopeTestid(prefix, scope) });
    box.checked = initial.scopes.includes(scope);
    return box;
  });
  const scopes = h(
    "fieldset",
    { class: "field scope-field", testid: `${prefix}-scopes` },
    h("legend", { class: "field-label" }, "Scopes"),
    h(
      "div",
      { class: "scope-choices" },
      ...SCOPE_CHOICES.map(({ label, hint }, i) =>
        h("label", { class: "scope-choice" }, boxes[i], h("span", {}, label, " ", h("span", { class: "hint" }, `(${hint})`))),
      ),
    ),
  );
  const skills = h("input", { type: "text", placeholder: "every skill", autocomplete: "off", testid: `${prefix}-skills` });
  skills.value = initial.skills;
  const expires = h("input", { type: "date", testid: `${prefix}-expires` });
  expires.value = initial.day;
  const metadata = h("textarea", { class: "mono", rows: 2, placeholder: "agent=researcher-7", testid: `${prefix}-metadata` });
  metadata.value = initial.metadata;

  const read = (form: HTMLFormElement): Record<string, unknown> | null => {
    const chosen = boxes.filter((box) => box.checked).map((box) => box.value);
    if (chosen.length === 0) {
      formError(form, "Choose at least one scope: a key that may do nothing is no key.");
      return null;
    }
    const expiresAt = expiryOfDay(expires.value);
    if (expiresAt === undefined) {
      fieldError(expires, "Pick a day, or leave it empty for a key that never expires.");
      return null;
    }
    const parsed = parseMetadataLines(metadata.value);
    if (!parsed.ok) {
      fieldError(metadata, parsed.problem);
      return null;
    }
    const body: Record<string, unknown> = {};
    if (!key || chosen.join(" ") !== initial.scopes.join(" ")) body.scopes = chosen;
    if (!key || skills.value.trim() !== initial.skills) body.allowed_skills = parseSkillList(skills.value);
    if (!key || expires.value !== initial.day) body.expires_at = expiresAt;
    if (!key || metadata.value.trim() !== initial.metadata) body.metadata = parsed.metadata;
    return body;
  };

  return {
    elements: [
      scopes,
      formField("Allowed skills", skills, "Slugs, separated by commas; empty for every skill."),
      formField("Expires", expires, "The key stops at the end of that day (UTC); empty: never."),
      formField("Metadata", metadata, "What the key is for, one name=value per line (shown in Usage)."),
    ],
    read,
    // A refusal naming a scope goes to the form's own line: the checkboxes have no line of their own.
    errorFields: [
      [/^metadata/i, metadata],
      [/^expires_at/i, expires],
      [/allowed_skills|skill/i, skills],
    ],
    reset() {
      boxes.forEach((box) => (box.checked = box.value === "calls"));
      skills.value = "";
      expires.value = "";
      metadata.value = "";
    },
  };
}

/**
 * What a key may do and what it is for, read-only under its name: its scopes, the skills it may call, when it
 * expires, and its metadata.
 */
export function accessLines(key: ApiKey): HTMLElement {
  const expired = key.expires_at !== null && Date.parse(key.expires_at) <= Date.now();
  const metadata = metadataSummary(key.metadata);
  return h(
    "div",
    { class: "key-access", testid: "key-access" },
    h("div", { class: "muted small", testid: "key-scopes" }, `can: ${key.scopes.join(", ")}`),
    h(
      "div",
      { class: "muted small", testid: "key-skills" },
      key.allowed_skills === null ? "every skill" : `only ${key.allowed_skills.join(", ")}`,
    ),
    key.expires_at === null
      ? h("div", { class: "muted small", testid: "key-expires" }, "never expires")
      : h(
          "div",
          { class: expired ? "small" : "muted small", testid: "key-expires", title: key.expires_at },
          `${expired ? "expired" : "expires"} ${formatDateTime(key.expires_at)}`,
        ),
    metadata === "" ? null : h("div", { class: "muted small key-metadata", testid: "key-metadata" }, metadata),
  );
}

/**
 * Edits a key in a <dialog>: its name, scopes, allowed skills, expiry and metadata, saved with `save` (the PATCH) as
 * one change of the fields that differ. The dialog stays open, with the gateway's refusal under the field it names,
 * until the save succeeds or the person cancels. Resolves the changed key, or undefined when nothing was saved.
 */
export function editDialog(key: ApiKey, save: (change: Record<string, unknown>) => Promise<ApiKey>): Promise<ApiKey | undefined> {
  return new Promise((resolve) => {
    const name = h("input", { type: "text", maxlength: 64, testid: "edit-name" });
    name.value = key.name;
    const access = accessFields("edit", key);
    const submit = h("button", { type: "submit", class: "btn btn-primary", testid: "edit-save" }, "Save");
    const cancel = h("button", { type: "button", class: "btn btn-ghost", testid: "edit-cancel" }, "Cancel");
    const form = validatedForm(
      { class: "stack", testid: "edit-form" },
      h("p", {}, `"${key.name || key.prefix}": what it may do and what it is for. A change applies to its next request.`),
      formField("Name", name),
      ...access.elements,
      h("div", { class: "actions" }, cancel, submit),
    );
    const dialog = h("dialog", { class: "dialog dialog-wide", "aria-label": "Edit key", testid: "edit-dialog" }, form);
    let answer: ApiKey | undefined;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      clearErrors(form);
      const change = access.read(form);
      if (change === null) return;
      if (name.value.trim() !== key.name) change.name = name.value.trim();
      if (Object.keys(change).length === 0) return void dialog.close();
      void busy(submit, async () => {
        try {
          answer = await save(change);
          dialog.close();
        } catch (error) {
          formError(form, error, [...access.errorFields, [/name/i, name]]);
        }
      });
    });
    cancel.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(answer);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    name.focus();
  });
}
