/**
 * Seller: the account's own skills (create, edit, unlist and relist), its earnings as they
 * move from pending to settled on-chain to claimed, and the claim itself.
 */

import { del, get, patch, post } from "../api";
import { busy, card, copyButton, h, monoValue, muted, replaceChildren, row, statusBadge, table } from "../dom";
import { confirmDialog } from "../dialog";
import { escrowClaimData } from "../calldata";
import { personalSign, requestAccount, sendTransaction, walletError } from "../ethereum";
import { formatBaseUnits, formatLatency, formatUsd, typedUsd, usdToBaseUnits } from "../format";
import { type Control, clearErrors, fieldError, formAction, formError, formField, reveal, validatedForm } from "../forms";
import { holdPage } from "../leave-guard";
import { platformInfo } from "../platform";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import { sellerSkillPath, skillPath } from "../router";
import type { BackendCheck, Earnings, Me, SellerSkill } from "../types";

export async function sellerPage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("Seller", "List a skill, get paid in USDC for every call, claim your earnings on-chain."));
  if (!ctx.me) return void ctx.root.append(signInPrompt("sell skills"));

  const earnings = h("div", { "aria-busy": "true" }, muted("Loading earnings…", { class: "muted loading" }));
  const list = h("div", { "aria-busy": "true" }, muted("Loading your skills…", { class: "muted loading" }));
  const editor = skillEditor(ctx, () => reloadSkills());
  const reloadSkills = () => loadSkills(ctx, list, editor, reloadSkills);
  const claim = claimForm(ctx, ctx.me, () => reloadEarnings());
  const reloadEarnings = async () => {
    claim.loading();
    claim.update(await loadEarnings(ctx, earnings));
  };
  ctx.root.append(
    card(
      "Earnings",
      earnings,
      h("p", { class: "muted" }, "Claiming sends the escrow's claim from your wallet; the gateway sponsors the gas."),
      claim.element,
    ),
    card("My skills", list),
    editor.element,
  );
  await Promise.all([reloadSkills(), reloadEarnings()]);
}

// ---- Earnings and claim --------------------------------------------------------------

interface ClaimForm {
  element: HTMLElement;
  /** Disables Claim while the earnings load. */
  loading(): void;
  /** Enables Claim when there is something to claim; otherwise says why it is disabled. */
  update(earnings: Earnings | null): void;
}

/**
 * The claim form. Claim is enabled only when the earnings have loaded and something is claimable;
 * the line under it says why not otherwise, and errors appear under the form, in view.
 */
function claimForm(ctx: PageContext, me: Me, reload: () => Promise<void>): ClaimForm {
  const to = h("input", {
    type: "text",
    placeholder: "0x… (optional: your payout address by default)",
    spellcheck: false,
    autocomplete: "off",
    class: "mono",
    testid: "claim-to",
  });
  const button = h("button", { type: "submit", class: "btn btn-primary", testid: "claim-button", disabled: true }, "Claim");
  const reason = h("p", { class: "hint", id: "claim-reason", testid: "claim-reason", "aria-live": "polite" }, "Loading earnings…");
  button.setAttribute("aria-describedby", reason.id);
  const tx = h("div", { class: "result", role: "status" });
  const form = validatedForm(
    { class: "inline-form", testid: "claim-form" },
    formField("Send to", to, "Any address; your payout address when empty."),
    formAction(button),
  );
  let claimable = false;
  let running = false;
  const apply = () => (button.disabled = running || !claimable);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (running || !claimable) return;
    clearErrors(form);
    const target = to.value.trim();
    if (target !== "" && !/^0x[0-9a-fA-F]{40}$/.test(target))
      return fieldError(to, "Enter an address: 0x followed by 40 hexadecimal characters, or leave it empty.");
    running = true;
    apply();
    button.classList.add("is-busy");
    button.textContent = "Claiming…";
    void (async () => {
      replaceChildren(tx);
      try {
        const sent = await claim(me, target === "" ? {} : { to: target });
        replaceChildren(
          tx,
          h("p", {}, `Claimed ${formatUsd(sent.amount, sent.amount_base_units)}. Transaction:`),
          h("code", { class: "mono mono-full", testid: "claim-tx" }, sent.tx_hash),
        );
        ctx.notice(`Claimed ${formatUsd(sent.amount, sent.amount_base_units)}.`);
      } catch (error) {
        formError(form, error, [[/address|0x/i, to]]);
      } finally {
        running = false;
        button.classList.remove("is-busy");
        button.textContent = "Claim";
      }
      await reload();
    })();
  });
  return {
    element: h("div", {}, form, reason, tx),
    loading() {
      claimable = false;
      apply();
      reason.textContent = "Loading earnings…";
    },
    update(earnings) {
      const units = earnings ? usdToBaseUnits(earnings.claimable ?? 0) : undefined;
      claimable = units !== undefined && units > 0n;
      apply();
      reason.textContent =
        earnings === null
          ? "Claim is unavailable: the earnings could not be read."
          : earnings.claimable === null
            ? "Claim is unavailable: the chain cannot say what is claimable right now."
            : claimable
              ? `${formatUsd(earnings.claimable)} is ready to claim.`
              : "Nothing to claim yet: earnings become claimable once a settlement batch has paid them on-chain.";
    },
  };
}

type Claimed = { amount: number; amount_base_units?: string; tx_hash: string };

/**
 * Claims the settled earnings. A wallet the gateway holds the key of is claimed in one call;
 * a wallet owned by the person's own key (SIWE) needs their signature on the UserOperation.
 * Throws what went wrong, in plain words, for the form to show.
 */
async function claim(me: Me, body: { to?: string }): Promise<Claimed> {
  const payout = me.addresses[0];
  if (payout !== undefined && payout.toLowerCase() !== me.wallet?.address.toLowerCase()) return claimFromBrowserWallet(payout, body.to);
  if (me.wallet?.owner !== "siwe") return post<Claimed>("/v1/seller/claim", body);
  const prepared = await post<{ user_op_hash: string; amount: number }>("/v1/seller/claim/prepare", body);
  let signature: string;
  try {
    signature = await personalSign(prepared.user_op_hash, me.wallet.owner_address ?? "");
  } catch (error) {
    throw new Error(walletError(error));
  }
  return post<Claimed>("/v1/seller/claim/submit", { user_op_hash: prepared.user_op_hash, signature });
}

/**
 * A payout address that is not the embedded wallet is the person's own: only it can send the
 * escrow's claim, from their browser wallet (which pays the gas). The amount shown is what the
 * escrow said was claimable just before.
 */
async function claimFromBrowserWallet(payout: string, to?: string): Promise<Claimed> {
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
    throw new Error(error instanceof Error && !("code" in error) ? error.message : walletError(error));
  }
}

/** Loads the earnings into `box` (keeping the last figures, marked busy, while it loads); null when unavailable. */
async function loadEarnings(ctx: PageContext, box: HTMLElement): Promise<Earnings | null> {
  box.setAttribute("aria-busy", "true");
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
    return e;
  } catch (error) {
    replaceChildren(box, muted("Earnings are unavailable right now."));
    ctx.fail(error);
    return null;
  } finally {
    box.removeAttribute("aria-busy");
  }
}

// ---- My skills -----------------------------------------------------------------------

async function loadSkills(ctx: PageContext, box: HTMLElement, editor: Editor, reload: () => Promise<void>): Promise<void> {
  box.setAttribute("aria-busy", "true");
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
            skill.pricing === "usage" ? `up to ${formatUsd(skill.max_price ?? 0)}` : formatUsd(skill.price ?? 0),
            statusBadge(skill.listed ? "listed" : "unlisted"),
            h(
              "div",
              { class: "row-actions" },
              h("a", { class: "btn btn-small btn-ghost", href: sellerSkillPath(skill.slug), testid: "skill-stats" }, "Stats"),
              edit,
              toggle,
            ),
          ]);
        }),
      ),
    );
  } catch (error) {
    replaceChildren(box, muted("Your skills are unavailable right now."));
    ctx.fail(error);
  } finally {
    box.removeAttribute("aria-busy");
  }
}

interface Editor {
  element: HTMLElement;
  edit(skill: SellerSkill): void;
}

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;

/**
 * One form for both creating a skill and editing one; editing keeps the slug (callers name the skill by it).
 * What a save did appears at the top of the card, in view: the success line, what the backend answered the
 * listing's test call, and the signing secret, which stays (through edits, and navigation asks first) until
 * the seller confirms having copied it.
 */
function skillEditor(ctx: PageContext, saved: () => Promise<void>): Editor {
  const title = h("h2", {}, "List a new skill");
  const name = h("input", { type: "text", maxlength: 100, autocomplete: "off", testid: "skill-name" });
  const slug = h("input", {
    type: "text",
    placeholder: "my-skill",
    spellcheck: false,
    autocomplete: "off",
    class: "mono",
    testid: "skill-slug",
  });
  const description = h("textarea", { rows: 3, testid: "skill-description" });
  const price = h("input", { type: "text", inputmode: "decimal", placeholder: "0.001", autocomplete: "off", testid: "skill-price" });
  // Fixed: the price of every call. Usage: the backend reports what each call came to (a signed X-Skill-Charge
  // header), the call holds at most the amount below (docs/selling.md, Pricing models).
  const pricing = h(
    "select",
    { testid: "skill-pricing" },
    h("option", { value: "fixed", selected: true }, "A fixed price per call"),
    h("option", { value: "usage" }, "By usage, up to a most per call"),
  );
  const backend = h("input", {
    type: "text",
    inputmode: "url",
    placeholder: "https://my-service.example/skill",
    spellcheck: false,
    autocomplete: "off",
    testid: "skill-backend-url",
  });
  const schema = h("textarea", {
    rows: 6,
    spellcheck: false,
    class: "mono",
    placeholder: '{"type":"object","properties":{"text":{"type":"string"}}}',
    testid: "skill-input-schema",
  });
  const outputSchema = h("textarea", {
    rows: 4,
    spellcheck: false,
    class: "mono",
    placeholder: '{"type":"object","required":["text"]}',
    testid: "skill-output-schema",
  });
  const save = h("button", { type: "submit", class: "btn btn-primary", testid: "skill-save" }, "List skill");
  const cancel = h("button", { type: "button", class: "btn btn-ghost" }, "Cancel edit");
  cancel.hidden = true;
  const savedLine = h("p", { class: "result result-ok", role: "status", testid: "skill-saved" });
  const secretSlot = h("div", { class: "listing-outcome" });
  const editCheck = h("div", { class: "listing-outcome" });
  const priceField = formField("Price per call (USD)", price, "Up to 6 decimals, e.g. 0.001.");
  const pricingField = formField(
    "Pricing",
    pricing,
    "By usage: your backend reports each call's charge in a signed X-Skill-Charge header (signCharge), never more than the most.",
  );
  /** The price field's label follows the pricing: a usage-priced skill's amount is the most a call may cost. */
  const labelPrice = () => {
    const label = priceField.querySelector(".field-label");
    if (label) label.textContent = pricing.value === "usage" ? "Most a call may cost (USD)" : "Price per call (USD)";
  };
  pricing.addEventListener("change", labelPrice);
  let bounds: { min: bigint; max: bigint } | undefined;
  let editing: SellerSkill | null = null;

  // The price's bounds are the gateway's own (GET /v1/platform): stated beside the field before anyone errs.
  void platformInfo().then((platform) => {
    const min = platform?.skill_price_min === undefined ? undefined : usdToBaseUnits(platform.skill_price_min);
    const max = platform?.skill_price_max === undefined ? undefined : usdToBaseUnits(platform.skill_price_max);
    if (min === undefined || max === undefined) return;
    bounds = { min, max };
    const hint = priceField.querySelector(".hint");
    if (hint) hint.textContent = `From ${formatBaseUnits(min)} to ${formatBaseUnits(max)} per call, up to 6 decimals.`;
  });

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
    labelPrice();
    clearErrors(form);
    slug.disabled = false;
    title.textContent = "List a new skill";
    save.textContent = "List skill";
    cancel.hidden = true;
  };
  cancel.addEventListener("click", reset);

  const form = validatedForm(
    { class: "stack", testid: "skill-form" },
    h(
      "div",
      { class: "grid grid-2" },
      formField("Name", name),
      formField("Slug", slug, "Lowercase letters, digits, dashes. Cannot change later."),
    ),
    formField("Description", description),
    h("div", { class: "grid grid-2" }, pricingField, priceField),
    formField("Backend URL", backend, "The gateway forwards each call here, signed; listing makes one test call to it."),
    formField("Input schema (JSON Schema, optional)", schema),
    formField(
      "Output schema (JSON Schema, optional)",
      outputSchema,
      "What your answers promise to be: an answer that breaks it is not charged, and counts against the skill.",
    ),
    h("div", { class: "actions" }, cancel, save),
  );

  /** The form's own checks, each under its field; true when all pass. */
  const check = (): { ok: true; inputSchema: unknown; outputSchema: unknown } | { ok: false } => {
    const problems: [Control, string][] = [];
    if (name.value.trim() === "") problems.push([name, "Enter a name for the skill."]);
    if (!editing && !SLUG.test(slug.value.trim()))
      problems.push([slug, "Use lowercase letters, digits and dashes (not first or last), at most 64."]);
    const units = typedUsd(price.value);
    if (units === undefined) problems.push([price, "Enter the price in dollars, with up to 6 decimals, e.g. 0.001."]);
    else if (bounds && (units < bounds.min || units > bounds.max))
      problems.push([price, `The price must be between ${formatBaseUnits(bounds.min)} and ${formatBaseUnits(bounds.max)}.`]);
    if (!/^https?:\/\/[^\s/]+/i.test(backend.value.trim()))
      problems.push([backend, "Enter the backend's full URL, starting with https://."]);
    let inputSchema: unknown = null;
    if (schema.value.trim() !== "") {
      try {
        inputSchema = JSON.parse(schema.value);
      } catch {
        problems.push([schema, "The input schema is not valid JSON."]);
      }
    }
    let output: unknown = null;
    if (outputSchema.value.trim() !== "") {
      try {
        output = JSON.parse(outputSchema.value);
      } catch {
        problems.push([outputSchema, "The output schema is not valid JSON."]);
      }
    }
    // Shown last to first, so that the first problem is the one focused and in view.
    for (const [control, message] of problems.reverse()) fieldError(control, message);
    return problems.length === 0 ? { ok: true, inputSchema, outputSchema: output } : { ok: false };
  };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearErrors(form);
    const checked = check();
    if (!checked.ok) return;
    const fields = {
      name: name.value.trim(),
      description: description.value,
      // The pricing goes with its amount (a change of pricing needs the matching one).
      pricing: pricing.value,
      [pricing.value === "usage" ? "max_price" : "price"]: price.value.trim(),
      backend_url: backend.value.trim(),
      input_schema: checked.inputSchema,
      output_schema: checked.outputSchema,
    };
    void busy(
      save,
      async () => {
        try {
          replaceChildren(editCheck);
          if (editing) {
            const updated = await patch<SellerSkill>(`/v1/seller/skills/${encodeURIComponent(editing.id)}`, fields);
            savedLine.textContent = `Saved "${fields.name}".`;
            // A new backend URL had the listing's test call: its answer is shown as a listing's is.
            if (updated.backend_check) replaceChildren(editCheck, backendCheckBox(updated.backend_check));
          } else {
            const created = await post<SellerSkill>("/v1/seller/skills", { ...fields, slug: slug.value.trim() });
            savedLine.textContent = `Listed "${created.name}".`;
            showSecret(created);
          }
          reset();
          reveal(savedLine);
          await saved();
        } catch (error) {
          formError(form, error, [
            [/pricing/i, pricing],
            [/price/i, price],
            [/slug/i, slug],
            [/output schema|output_schema/i, outputSchema],
            [/schema/i, schema],
            [/backend|test call|url|internet|resolves/i, backend],
            [/^name/i, name],
            [/description/i, description],
          ]);
        }
      },
      editing ? "Saving…" : "Testing the backend…",
    );
  });

  /** The new skill's secret and its backend's answer, until the seller says they copied the secret. */
  const showSecret = (created: SellerSkill) => {
    const release = holdPage(
      `The signing secret of "${created.name}" is shown only once, and you have not confirmed copying it. Leave, and lose it?`,
    );
    const confirm = h("button", { type: "button", class: "btn btn-small", testid: "secret-confirm" }, "I've copied it");
    confirm.addEventListener("click", () => {
      release();
      replaceChildren(secretSlot);
    });
    replaceChildren(
      secretSlot,
      created.backend_check ? backendCheckBox(created.backend_check) : null,
      signingSecretBox(created.name, created.signing_secret ?? "", confirm),
    );
  };

  return {
    element: h("section", { class: "card" }, title, savedLine, editCheck, secretSlot, form),
    edit(skill) {
      reset();
      editing = skill;
      name.value = skill.name;
      slug.value = skill.slug;
      slug.disabled = true;
      description.value = skill.description;
      // A usage-priced skill's amount is its max_price: the form edits that one.
      pricing.value = skill.pricing === "usage" ? "usage" : "fixed";
      labelPrice();
      price.value = String(skill.price ?? skill.max_price ?? "");
      backend.value = skill.backend_url;
      schema.value = skill.input_schema ? JSON.stringify(skill.input_schema, null, 2) : "";
      outputSchema.value = skill.output_schema ? JSON.stringify(skill.output_schema, null, 2) : "";
      title.textContent = `Edit ${skill.name}`;
      save.textContent = "Save changes";
      cancel.hidden = false;
      savedLine.textContent = "";
      replaceChildren(editCheck);
      form.scrollIntoView({ behavior: "smooth", block: "start" });
      name.focus();
    },
  };
}

/** What the backend answered the listing's test call: its status, latency and the start of its answer. */
function backendCheckBox(check: BackendCheck): HTMLElement {
  return h(
    "div",
    { class: `check ${check.ok ? "check-ok" : "check-warn"}`, testid: "backend-check" },
    h("p", {}, check.message),
    h(
      "p",
      { class: "muted small" },
      `Test call: ${check.status === null ? "no HTTP status" : `HTTP ${check.status}`} · ${formatLatency(check.latency_ms)}`,
    ),
    check.snippet ? h("pre", { class: "code check-snippet", testid: "backend-check-snippet" }, check.snippet) : null,
  );
}

/** The skill's signing secret, this once: the backend verifies the gateway's signature on each call with it. */
function signingSecretBox(skillName: string, value: string, confirm: HTMLButtonElement): HTMLElement {
  return h(
    "div",
    { class: "secret-box", testid: "secret-box" },
    h(
      "p",
      { class: "warning" },
      `The signing secret of "${skillName}", shown only once. Your backend checks each request's signature with it; store it now.`,
    ),
    h(
      "div",
      { class: "secret" },
      h("code", { class: "mono mono-full", testid: "signing-secret" }, value),
      copyButton(value, { class: "btn btn-small" }),
    ),
    h("div", { class: "actions" }, confirm),
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
