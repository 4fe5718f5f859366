/**
 * API Keys: create one (the whole key is shown this once: the gateway keeps only its hash),
 * list the live ones with their last use, revoke after a confirmation.
 */

import { del, get, post } from "../api";
import { busy, card, copyButton, field, h, muted, replaceChildren, row, table } from "../dom";
import { confirmDialog } from "../dialog";
import { formatDateTime, formatLastUsed } from "../format";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import type { ApiKey } from "../types";

export async function keysPage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("API Keys", "Agents call skills with an atom_ key; every call is billed to this account."));
  if (!ctx.me) return void ctx.root.append(signInPrompt("manage your API keys"));

  const list = h("div", {}, muted("Loading keys…"));
  const created = h("div", {});
  const reload = () => loadKeys(ctx, list, reload);

  const name = h("input", { type: "text", maxlength: 64, placeholder: "e.g. research-agent", testid: "key-name" });
  const submit = h("button", { type: "submit", class: "btn btn-primary", testid: "key-create" }, "Create Key");
  const form = h("form", { class: "inline-form" }, field("Name", name), submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void busy(submit, async () => {
      try {
        const key = await post<ApiKey>("/v1/keys", { name: name.value.trim() });
        name.value = "";
        replaceChildren(created, newKeyBox(key));
        await reload();
      } catch (error) {
        ctx.fail(error);
      }
    });
  });

  ctx.root.append(card("Create a key", form, created), card("Your keys", list));
  await reload();
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

async function loadKeys(ctx: PageContext, box: HTMLElement, reload: () => Promise<void>): Promise<void> {
  try {
    const keys = await get<ApiKey[]>("/v1/keys");
    if (keys.length === 0) return replaceChildren(box, muted("No keys yet — create one above to call skills from your agent."));
    const headers = ["Name", "Key", "Created", "Last used", ""];
    replaceChildren(
      box,
      table(
        { class: "table" },
        headers,
        keys.map((key) => {
          const revoke = h("button", { type: "button", class: "btn btn-small btn-danger-ghost", testid: "key-revoke" }, "Revoke");
          revoke.addEventListener("click", async () => {
            const label = key.name || key.prefix;
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
          return row({ testid: "key-row", "data-key-id": key.id }, headers, [
            key.name || h("span", { class: "muted" }, "(unnamed)"),
            h("code", { class: "mono" }, `${key.prefix}…`),
            formatDateTime(key.created_at),
            formatLastUsed(key.last_used_at),
            revoke,
          ]);
        }),
      ),
    );
  } catch (error) {
    replaceChildren(box, muted("Keys are unavailable right now."));
    ctx.fail(error);
  }
}
