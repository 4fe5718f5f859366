/**
 * API Keys: create one (the whole key is shown this once: the gateway keeps only its hash),
 * optionally with a spending limit per day, per month or in total, its scopes, the skills it may
 * call, an expiry and metadata (./key-access.ts); list the live ones with what they may do, their
 * last use, their calls and spend today, this month and in total (with a link to their usage),
 * their limit, what they spent in its current period and when that resets; edit what a key may do
 * and its metadata; change or remove a limit; revoke after a confirmation.
 */

import { del, get, patch, post } from "../api";
import { busy, card, copyButton, h, muted, replaceChildren, row, table } from "../dom";
import { confirmDialog } from "../dialog";
import {
  PERIOD_WORDS,
  decimalUsd,
  formatCount,
  formatDateTime,
  formatLastUsed,
  formatResets,
  formatSpendLimit,
  formatUsd,
  parseBaseUnits,
  typedUsd,
} from "../format";
import { clearErrors, fieldError, formAction, formError, formField, validatedForm } from "../forms";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import type { ApiKey, KeysUsage, SpendPeriod, SpendTotal } from "../types";
import { accessFields, accessLines, editDialog } from "./key-access";

export async function keysPage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("API Keys", "Agents call skills with an atom_ key; every call is billed to this account."));
  if (!ctx.me) return void ctx.root.append(signInPrompt("manage your API keys"));

  const list = h("div", {}, muted("Loading keys…"));
  const created = h("div", {});
  const reload = () => loadKeys(ctx, list, reload);

  const name = h("input", { type: "text", maxlength: 64, placeholder: "e.g. research-agent", testid: "key-name" });
  const limit = limitInput("key-limit");
  const period = periodSelect("key-period", "day");
  const access = accessFields("create");
  const submit = h("button", { type: "submit", class: "btn btn-primary", testid: "key-create" }, "Create Key");
  const form = validatedForm(
    { class: "inline-form key-form", testid: "key-form" },
    formField("Name", name),
    formField("Spending limit (USD)", limit, "Optional; up to 6 decimals."),
    formField("Per", period),
    ...access.elements,
    formAction(submit),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearErrors(form);
    const problem = limitProblem(limit.value);
    if (problem) return fieldError(limit, problem);
    const asked = access.read(form);
    if (asked === null) return;
    void busy(submit, async () => {
      try {
        const amount = limit.value.trim();
        const body = {
          name: name.value.trim(),
          ...(amount === "" ? {} : { spend_limit_usd: amount, spend_limit_period: period.value }),
          ...asked,
        };
        const key = await post<ApiKey>("/v1/keys", body);
        name.value = "";
        limit.value = "";
        access.reset();
        replaceChildren(created, newKeyBox(key));
        await reload();
      } catch (error) {
        formError(form, error, [...access.errorFields, [/limit|spend/i, limit], [/period/i, period], [/name/i, name]]);
      }
    });
  });

  ctx.root.append(card("Create a key", form, created), card("Your keys", list));
  await reload();
}

/** What is wrong with a typed spending limit (empty means none), or undefined when it is fine. */
function limitProblem(text: string): string | undefined {
  if (text.trim() === "") return undefined;
  const units = typedUsd(text);
  return units === undefined || units === 0n
    ? "Enter the limit in dollars, above zero with up to 6 decimals, e.g. 5.00, or leave it empty for no limit."
    : undefined;
}

/** A USD amount field: text, so that what is typed reaches the gateway as typed (it checks the decimals). */
function limitInput(testid: string, value = ""): HTMLInputElement {
  const input = h("input", { type: "text", inputmode: "decimal", placeholder: "none, or e.g. 5.00", autocomplete: "off", testid });
  input.value = value;
  return input;
}

function periodSelect(testid: string, selected: SpendPeriod): HTMLSelectElement {
  const labels: Record<SpendPeriod, string> = { day: "day (UTC)", month: "month (UTC)", total: "in total (never resets)" };
  return h(
    "select",
    { testid },
    ...(Object.keys(PERIOD_WORDS) as SpendPeriod[]).map((p) => h("option", { value: p, selected: p === selected }, labels[p])),
  );
}

/** The new key, once: with a copy button and a warning that it cannot be shown again. */
function newKeyBox(key: ApiKey): HTMLElement {
  const full = key.key ?? "";
  return h(
    "div",
    { class: "secret-box" },
    h(
      "p",
      { class: "warning", testid: "key-warning" },
      "Copy this key now. It is shown only once: the gateway stores a hash, so nobody can show it to you again.",
    ),
    h(
      "div",
      { class: "secret" },
      h("code", { class: "mono mono-full", testid: "new-key" }, full),
      copyButton(full, { testid: "key-copy", class: "btn btn-small" }),
    ),
  );
}

type KeyUsage = KeysUsage["keys"][number];
const NO_CALLS: SpendTotal = { spend: 0, spend_base_units: "0", calls: 0 };
/** How the key's usage names each spending period: what it spent "today", "this month", "in total". */
const PERIOD_SPENT: Record<SpendPeriod, { words: string; usage: keyof Omit<KeyUsage, "api_key_id"> }> = {
  day: { words: "today", usage: "today" },
  month: { words: "this month", usage: "month" },
  total: { words: "in total", usage: "total" },
};

/**
 * A key's calls and spend today, this month (UTC) and in total (a dash when they could not be read), and a link
 * to the Usage page showing its calls.
 */
function usageCell(key: ApiKey, usage: KeyUsage | undefined | null): HTMLElement {
  const line = (label: string, total: SpendTotal) => [
    h("dt", {}, label),
    h("dd", {}, `${formatUsd(total.spend, total.spend_base_units)} · ${formatCount(total.calls, "call")}`),
  ];
  const figures =
    usage === null
      ? h("span", { class: "muted", testid: "key-usage" }, "—")
      : h(
          "dl",
          { class: "key-usage", testid: "key-usage" },
          ...line("Today", usage?.today ?? NO_CALLS),
          ...line("This month", usage?.month ?? NO_CALLS),
          ...line("Total", usage?.total ?? NO_CALLS),
        );
  const link = h(
    "a",
    { class: "small", href: `/usage?api_key_id=${encodeURIComponent(key.id)}`, testid: "key-usage-link" },
    "See its calls",
    h("span", { class: "offscreen" }, ` (${key.name || key.prefix})`),
    " →",
  );
  return h("div", { class: "key-usage-cell" }, figures, link);
}

/** A key's spending limit, what it spent in the limit's current period (with its calls) and when that resets. */
function limitCell(key: ApiKey, usage: KeyUsage | undefined | null): HTMLElement {
  const shown = h("span", { testid: "key-limit-shown" }, formatSpendLimit(key));
  if (key.spend_limit_period === null) return h("div", {}, shown);
  const period = PERIOD_SPENT[key.spend_limit_period];
  const calls = usage === null ? "" : `, ${formatCount((usage?.[period.usage] ?? NO_CALLS).calls, "call")}`;
  return h(
    "div",
    {},
    shown,
    h("br", {}),
    h(
      "span",
      { class: "muted small", testid: "key-spent" },
      `${formatUsd(key.spent_usd, key.spent_base_units)} spent ${period.words}${calls}`,
    ),
    h("br", {}),
    h("span", { class: "muted small", testid: "key-resets", title: key.resets_at ?? "" }, formatResets(key)),
  );
}

async function loadKeys(ctx: PageContext, box: HTMLElement, reload: () => Promise<void>): Promise<void> {
  try {
    // A key's usage is a second read: the keys are listed without it (a dash) when it fails.
    const [keys, usage] = await Promise.all([
      get<ApiKey[]>("/v1/keys"),
      get<KeysUsage>("/v1/usage/keys").then(
        (answer) => new Map(answer.keys.map((k) => [k.api_key_id, k])),
        () => null,
      ),
    ]);
    if (keys.length === 0) return replaceChildren(box, muted("No keys yet — create one above to call skills from your agent."));
    const headers = ["Name", "Key", "Created", "Last used", "Calls and spend", "Spending limit", ""];
    replaceChildren(
      box,
      table(
        { class: "table" },
        headers,
        keys.map((key) => {
          const label = key.name || key.prefix;
          const editKey = h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "key-edit" }, "Edit…");
          editKey.addEventListener("click", async () => {
            const updated = await editDialog(key, (change) => patch<ApiKey>(`/v1/keys/${encodeURIComponent(key.id)}`, change));
            if (!updated) return;
            ctx.notice(`Saved "${updated.name || updated.prefix}".`);
            await reload();
          });
          const edit = h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "key-edit-limit" }, "Limit…");
          edit.addEventListener("click", async () => {
            const updated = await limitDialog(key, (change) => patch<ApiKey>(`/v1/keys/${encodeURIComponent(key.id)}`, change));
            if (!updated) return;
            ctx.notice(
              updated.spend_limit_period === null
                ? `"${label}" has no spending limit now.`
                : `"${label}" may now spend ${formatSpendLimit(updated)}.`,
            );
            await reload();
          });
          const revoke = h("button", { type: "button", class: "btn btn-small btn-danger-ghost", testid: "key-revoke" }, "Revoke");
          revoke.addEventListener("click", async () => {
            if (
              !(await confirmDialog(`Revoke "${label}"? Calls with this key fail from now on. This cannot be undone.`, "Revoke", {
                danger: true,
              }))
            )
              return;
            await busy(revoke, async () => {
              try {
                await del(`/v1/keys/${encodeURIComponent(key.id)}`);
                ctx.notice(`Revoked "${label}".`);
                await reload();
              } catch (error) {
                ctx.fail(error);
              }
            });
          });
          const keyUsage = usage === null ? null : usage.get(key.id);
          return row({ testid: "key-row", "data-key-id": key.id }, headers, [
            h("div", {}, key.name || h("span", { class: "muted" }, "(unnamed)"), accessLines(key)),
            h("code", { class: "mono" }, `${key.prefix}…`),
            formatDateTime(key.created_at),
            formatLastUsed(key.last_used_at),
            usageCell(key, keyUsage),
            limitCell(key, keyUsage),
            h("div", { class: "row-actions key-actions" }, editKey, edit, revoke),
          ]);
        }),
      ),
    );
  } catch (error) {
    replaceChildren(box, muted("Keys are unavailable right now."));
    ctx.fail(error);
  }
}

/**
 * Asks for a key's new spending limit in a <dialog>: the amount and its period, or removing it, and saves it with
 * `save` (the PATCH). The dialog stays open, with the error under its field, until the save succeeds or the person
 * cancels. Resolves the updated key, or undefined when cancelled. The gateway checks the amount too (positive, at
 * most 6 decimals).
 */
function limitDialog(
  key: ApiKey,
  save: (change: { spend_limit_usd: string | null; spend_limit_period?: SpendPeriod }) => Promise<ApiKey>,
): Promise<ApiKey | undefined> {
  return new Promise((resolve) => {
    const current = key.spend_limit_base_units === null ? undefined : parseBaseUnits(key.spend_limit_base_units);
    const amount = limitInput("limit-amount", current === undefined ? "" : decimalUsd(current));
    const period = periodSelect("limit-period", key.spend_limit_period ?? "day");
    const submit = h("button", { type: "submit", class: "btn btn-primary", testid: "limit-save" }, "Save");
    const remove = h("button", { type: "button", class: "btn btn-danger-ghost", testid: "limit-remove" }, "Remove limit");
    remove.hidden = key.spend_limit_period === null;
    const cancel = h("button", { type: "button", class: "btn btn-ghost", testid: "limit-cancel" }, "Cancel");
    const spent =
      key.spend_limit_period === null
        ? "It has no limit now."
        : `It may spend ${formatSpendLimit(key)} and has spent ${formatUsd(key.spent_usd, key.spent_base_units)} (${formatResets(key)}). A lower limit than that stops its calls until the reset; a new period starts counting from zero.`;
    const form = validatedForm(
      { class: "stack", testid: "limit-form" },
      h("p", {}, `Spending limit of "${key.name || key.prefix}". ${spent}`),
      formField("Spending limit (USD)", amount, "Up to 6 decimals; empty for no limit."),
      formField("Per", period),
      h("div", { class: "actions" }, cancel, remove, submit),
    );
    const dialog = h("dialog", { class: "dialog", "aria-label": "Spending limit", testid: "limit-dialog" }, form);
    let answer: ApiKey | undefined;
    const send = (button: HTMLButtonElement, change: { spend_limit_usd: string | null; spend_limit_period?: SpendPeriod }) =>
      busy(button, async () => {
        try {
          answer = await save(change);
          dialog.close();
        } catch (error) {
          formError(form, error, [
            [/limit|spend/i, amount],
            [/period/i, period],
          ]);
        }
      });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      clearErrors(form);
      const value = amount.value.trim();
      const problem = limitProblem(value);
      if (problem) return fieldError(amount, problem);
      void send(
        submit,
        value === "" ? { spend_limit_usd: null } : { spend_limit_usd: value, spend_limit_period: period.value as SpendPeriod },
      );
    });
    remove.addEventListener("click", () => void send(remove, { spend_limit_usd: null }));
    cancel.addEventListener("click", () => dialog.close());
    // Escape closes the dialog too: a cancel.
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(answer);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    amount.focus();
  });
}
