/**
 * Seller: the account's own skills (create, edit, unlist and relist), its earnings as they
 * move from pending to settled on-chain to claimed, and the claim itself.
 */

import { del, get, patch, post } from "../api";
import { busy, card, copyButton, field, h, monoValue, muted, replaceChildren, row, statusBadge, table } from "../dom";
import { confirmDialog } from "../dialog";
import { escrowClaimData } from "../calldata";
import { personalSign, requestAccount, sendTransaction, walletError } from "../ethereum";
import { formatUsd } from "../format";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import { skillPath } from "../router";
import type { Earnings, Me, SellerSkill } from "../types";

export async function sellerPage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("Seller", "List a skill, get paid in USDC for every call, claim your earnings on-chain."));
  if (!ctx.me) return void ctx.root.append(signInPrompt("sell skills"));

  const earnings = h("div", {}, muted("Loading earnings…"));
  const list = h("div", {}, muted("Loading your skills…"));
  const editor = skillEditor(ctx, () => reloadSkills());
  const reloadSkills = () => loadSkills(ctx, list, editor, reloadSkills);
  ctx.root.append(earningsCard(ctx, ctx.me, earnings), card("My skills", list), editor.element);
  await Promise.all([reloadSkills(), loadEarnings(ctx, earnings)]);
}

// ---- Earnings and claim --------------------------------------------------------------

function earningsCard(ctx: PageContext, me: Me, figures: HTMLElement): HTMLElement {
  const to = h("input", {
    type: "text",
    placeholder: "0x… (optional: your payout address by default)",
    spellcheck: false,
    class: "mono",
    testid: "claim-to",
  });
  const button = h("button", { type: "submit", class: "btn btn-primary", testid: "claim-button" }, "Claim");
  const tx = h("div", { class: "result", role: "status" });
  const form = h("form", { class: "inline-form" }, field("Send to", to), button);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void busy(button, async () => {
      replaceChildren(tx);
      try {
        const target = to.value.trim();
        const sent = await claim(ctx, me, target === "" ? {} : { to: target });
        if (!sent) return;
        replaceChildren(
          tx,
          h("p", {}, `Claimed ${formatUsd(sent.amount, sent.amount_base_units)}. Transaction:`),
          h("code", { class: "mono mono-full", testid: "claim-tx" }, sent.tx_hash),
        );
        ctx.notice(`Claimed ${formatUsd(sent.amount, sent.amount_base_units)}.`);
        await loadEarnings(ctx, figures);
      } catch (error) {
        ctx.fail(error);
      }
    });
  });
  return card(
    "Earnings",
    figures,
    h("p", { class: "muted" }, "Claiming sends the escrow's claim from your wallet; the gateway sponsors the gas."),
    form,
    tx,
  );
}

type Claimed = { amount: number; amount_base_units?: string; tx_hash: string };

/**
 * Claims the settled earnings. A wallet the gateway holds the key of is claimed in one call;
 * a wallet owned by the person's own key (SIWE) needs their signature on the UserOperation.
 */
async function claim(ctx: PageContext, me: Me, body: { to?: string }): Promise<Claimed | undefined> {
  const payout = me.addresses[0];
  if (payout !== undefined && payout.toLowerCase() !== me.wallet?.address.toLowerCase())
    return claimFromBrowserWallet(ctx, payout, body.to);
  if (me.wallet?.owner !== "siwe") return post<Claimed>("/v1/seller/claim", body);
  const prepared = await post<{ user_op_hash: string; amount: number }>("/v1/seller/claim/prepare", body);
  let signature: string;
  try {
    signature = await personalSign(prepared.user_op_hash, me.wallet.owner_address ?? "");
  } catch (error) {
    ctx.fail(walletError(error));
    return undefined;
  }
  return post<Claimed>("/v1/seller/claim/submit", { user_op_hash: prepared.user_op_hash, signature });
}

/**
 * A payout address that is not the embedded wallet is the person's own: only it can send the
 * escrow's claim, from their browser wallet (which pays the gas). The amount shown is what the
 * escrow said was claimable just before.
 */
async function claimFromBrowserWallet(ctx: PageContext, payout: string, to?: string): Promise<Claimed | undefined> {
  const earnings = await get<Earnings>("/v1/earnings");
  if (!earnings.escrow) throw new Error("The gateway has no escrow chain: there is nothing to claim on.");
  if (!earnings.claimable) throw new Error("There are no settled earnings to claim yet.");
  try {
    const from = await requestAccount();
    if (from.toLowerCase() !== payout.toLowerCase()) {
      throw new Error(`Your payout address is ${payout}: switch your wallet to that account to claim.`);
    }
    const txHash = await sendTransaction({ from, to: earnings.escrow, data: escrowClaimData(to) });
    return { amount: earnings.claimable, tx_hash: txHash };
  } catch (error) {
    ctx.fail(error instanceof Error && !("code" in error) ? error.message : walletError(error));
    return undefined;
  }
}

async function loadEarnings(ctx: PageContext, box: HTMLElement): Promise<void> {
  try {
    const e = await get<Earnings>("/v1/earnings");
    const stat = (label: string, value: number | null, testid: string, hint: string) =>
      h(
        "div",
        { class: "stat-cell" },
        h("span", { class: "field-label" }, label),
        h("span", { class: "stat-value stat-small", testid }, formatUsd(value)),
        h("span", { class: "hint" }, hint),
      );
    replaceChildren(
      box,
      h(
        "div",
        { class: "stats" },
        stat("Pending", e.pending, "earnings-pending", "earned, not yet in a batch"),
        stat("Settled", e.settled, "earnings-settled", "on-chain, total"),
        stat("Claimable", e.claimable, "earnings-claimable", "ready to claim now"),
        stat("Claimed", e.claimed, "earnings-claimed", "paid out"),
      ),
      e.address ? h("p", { class: "muted payout" }, "Paid to ", monoValue(e.address)) : null,
    );
  } catch (error) {
    replaceChildren(box, muted("Earnings are unavailable right now."));
    ctx.fail(error);
  }
}

// ---- My skills -----------------------------------------------------------------------

async function loadSkills(ctx: PageContext, box: HTMLElement, editor: Editor, reload: () => Promise<void>): Promise<void> {
  try {
    const skills = await get<SellerSkill[]>("/v1/seller/skills");
    if (skills.length === 0) return replaceChildren(box, muted("No skills yet — list your first one with the form below."));
    const headers = ["Skill", "Price", "Status", ""];
    replaceChildren(
      box,
      table(
        { class: "table" },
        headers,
        skills.map((skill) => {
          const edit = h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "skill-edit" }, "Edit");
          edit.addEventListener("click", () => editor.edit(skill));
          const toggle = skill.listed
            ? h("button", { type: "button", class: "btn btn-small btn-danger-ghost", testid: "skill-unlist" }, "Unlist")
            : h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "skill-relist" }, "Relist");
          toggle.addEventListener("click", async () => {
            if (
              skill.listed &&
              !(await confirmDialog(`Unlist "${skill.name}"? Calls to it fail until you relist it.`, "Unlist", { danger: true }))
            )
              return;
            await busy(toggle, async () => {
              try {
                const path = `/v1/seller/skills/${encodeURIComponent(skill.id)}`;
                if (skill.listed) await del(path);
                else await patch(path, { listed: true });
                ctx.notice(skill.listed ? `Unlisted "${skill.name}".` : `Listed "${skill.name}" again.`);
                await reload();
              } catch (error) {
                ctx.fail(error);
              }
            });
          });
          return row({ testid: "seller-skill-row", "data-slug": skill.slug }, headers, [
            h(
              "div",
              {},
              skill.listed ? h("a", { href: skillPath(skill.slug) }, skill.name) : skill.name,
              h("div", { class: "mono muted small" }, skill.slug),
            ),
            formatUsd(skill.price),
            statusBadge(skill.listed ? "listed" : "unlisted"),
            h("div", { class: "row-actions" }, edit, toggle),
          ]);
        }),
      ),
    );
  } catch (error) {
    replaceChildren(box, muted("Your skills are unavailable right now."));
    ctx.fail(error);
  }
}

interface Editor {
  element: HTMLElement;
  edit(skill: SellerSkill): void;
}

/** One form for both creating a skill and editing one; editing keeps the slug (callers name the skill by it). */
function skillEditor(ctx: PageContext, saved: () => Promise<void>): Editor {
  const title = h("h2", {}, "List a new skill");
  const name = h("input", { type: "text", required: true, maxlength: 80, testid: "skill-name" });
  const slug = h("input", {
    type: "text",
    required: true,
    pattern: "[a-z0-9](?:[a-z0-9\\-]{0,62}[a-z0-9])?",
    title: "Lower-case letters, digits and dashes, not starting or ending with a dash",
    placeholder: "my-skill",
    spellcheck: false,
    class: "mono",
    testid: "skill-slug",
  });
  const description = h("textarea", { rows: 3, testid: "skill-description" });
  const price = h("input", { type: "text", inputmode: "decimal", required: true, placeholder: "0.001", testid: "skill-price" });
  const backend = h("input", {
    type: "url",
    required: true,
    placeholder: "https://my-service.example/skill",
    spellcheck: false,
    testid: "skill-backend-url",
  });
  const schema = h("textarea", {
    rows: 6,
    spellcheck: false,
    class: "mono",
    placeholder: '{"type":"object","properties":{"text":{"type":"string"}}}',
    testid: "skill-input-schema",
  });
  const save = h("button", { type: "submit", class: "btn btn-primary", testid: "skill-save" }, "List skill");
  const cancel = h("button", { type: "button", class: "btn btn-ghost" }, "Cancel edit");
  cancel.hidden = true;
  const secret = h("div", {});
  let editing: SellerSkill | null = null;

  // The slug follows the name until the person types a slug of their own.
  let slugTouched = false;
  slug.addEventListener("input", () => (slugTouched = true));
  name.addEventListener("input", () => {
    if (!slugTouched && !editing) slug.value = slugify(name.value);
  });

  const reset = () => {
    editing = null;
    slugTouched = false;
    form.reset();
    slug.disabled = false;
    title.textContent = "List a new skill";
    save.textContent = "List skill";
    cancel.hidden = true;
  };
  cancel.addEventListener("click", reset);

  const form = h(
    "form",
    { class: "stack", testid: "skill-form" },
    h("div", { class: "grid grid-2" }, field("Name", name), field("Slug", slug, "Lowercase letters, digits, dashes. Cannot change later.")),
    field("Description", description),
    h(
      "div",
      { class: "grid grid-2" },
      field("Price per call (USD)", price, "Up to 6 decimals, e.g. 0.001"),
      field("Backend URL", backend, "The gateway forwards each call here, signed."),
    ),
    field("Input schema (JSON Schema, optional)", schema),
    h("div", { class: "actions" }, cancel, save),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    let inputSchema: unknown = null;
    if (schema.value.trim() !== "") {
      try {
        inputSchema = JSON.parse(schema.value);
      } catch {
        return ctx.fail("The input schema is not valid JSON.");
      }
    }
    const fields = {
      name: name.value.trim(),
      description: description.value,
      price: price.value.trim(),
      backend_url: backend.value.trim(),
      input_schema: inputSchema,
    };
    void busy(save, async () => {
      try {
        if (editing) {
          await patch(`/v1/seller/skills/${encodeURIComponent(editing.id)}`, fields);
          ctx.notice(`Saved "${fields.name}".`);
          replaceChildren(secret);
        } else {
          const created = await post<SellerSkill>("/v1/seller/skills", { ...fields, slug: slug.value.trim() });
          ctx.notice(`Listed "${created.name}".`);
          replaceChildren(secret, signingSecretBox(created.signing_secret ?? ""));
        }
        reset();
        await saved();
      } catch (error) {
        ctx.fail(error);
      }
    });
  });

  return {
    element: h("section", { class: "card" }, title, form, secret),
    edit(skill) {
      editing = skill;
      name.value = skill.name;
      slug.value = skill.slug;
      slug.disabled = true;
      description.value = skill.description;
      price.value = String(skill.price);
      backend.value = skill.backend_url;
      schema.value = skill.input_schema ? JSON.stringify(skill.input_schema, null, 2) : "";
      title.textContent = `Edit ${skill.name}`;
      save.textContent = "Save changes";
      cancel.hidden = false;
      replaceChildren(secret);
      form.scrollIntoView({ behavior: "smooth", block: "start" });
      name.focus();
    },
  };
}

/** The skill's signing secret, this once: the backend verifies the gateway's signature on each call with it. */
function signingSecretBox(value: string): HTMLElement {
  return h(
    "div",
    { class: "secret-box" },
    h(
      "p",
      { class: "warning" },
      "Your signing secret, shown only once. Your backend checks each request's signature with it; store it now.",
    ),
    h(
      "div",
      { class: "secret" },
      h("code", { class: "mono mono-full", testid: "signing-secret" }, value),
      copyButton(value, { class: "btn btn-small" }),
    ),
  );
}

/** A slug from a name: lowercase, dashes for anything else. */
export function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 64);
}
