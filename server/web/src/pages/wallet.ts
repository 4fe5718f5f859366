/**
 * Wallet: the balance, the embedded wallet's address and QR code for USDC transfers, the
 * sandbox card top-up, withdrawals (to an address through the embedded wallet, else a voucher), and the
 * account's money history.
 */

import { get, post } from "../api";
import { busy, card, copyButton, copyText, h, monoValue, muted, replaceChildren, row, statusBadge, table } from "../dom";
import { personalSign, walletError } from "../ethereum";
import { formatBaseUnits, formatDateTime, formatUsd, parseBaseUnits, typedUsd, usdToBaseUnits } from "../format";
import { type Control, clearErrors, fieldError, formAction, formError, formField, validatedForm } from "../forms";
import { platformInfo } from "../platform";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import { me as currentMe, refreshMe } from "../session";
import type { CardCheckout, HistoryItem, IssuedVoucher, Me, Withdrawal } from "../types";
import { gettingStarted } from "./getting-started";

/** How long the page waits for a paid card top-up to reach the balance (the chain mines, the indexer credits). */
const CREDIT_WAIT_MS = 90_000;
const POLL_MS = 1_000;

export async function walletPage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("Wallet", "Your USDC balance pays for skill calls, a fraction of a cent at a time."));
  if (!ctx.me) return void ctx.root.append(signInPrompt("see your wallet"));

  const balances = h("div", { class: "grid grid-2" });
  const history = h("div", { "aria-busy": "true" }, muted("Loading history…", { class: "muted loading" }));
  const withdrawals = h("div", {});
  const reloadHistory = () => loadHistory(ctx, history);
  const reloadWithdrawals = () => loadWithdrawals(ctx, withdrawals);
  const refresh = async () => {
    const me = await refreshMe();
    if (me) renderBalances(balances, me);
    await reloadHistory();
  };

  renderBalances(balances, ctx.me);
  // A first visit's checklist (top up, key, first call) leads the page; it shows nothing to an account that has made calls.
  ctx.root.append(gettingStarted(ctx, ctx.me, refresh));
  ctx.root.append(
    balances,
    h("div", { class: "grid grid-2" }, depositCard(ctx, ctx.me, refresh), cardTopupCard(ctx, refresh)),
    withdrawCard(ctx.me, withdrawals, async () => {
      await refresh();
      await reloadWithdrawals();
    }),
    card("History", history),
  );
  await Promise.all([reloadHistory(), reloadWithdrawals()]);
}

function renderBalances(box: HTMLElement, me: Me): void {
  replaceChildren(
    box,
    h(
      "section",
      { class: "card stat" },
      h("h2", {}, "Available"),
      h("p", { class: "stat-value", testid: "balance-available" }, formatUsd(me.balance.available, me.balance.available_base_units)),
      h("p", { class: "muted" }, "USDC, ready to spend or withdraw"),
    ),
    h(
      "section",
      { class: "card stat" },
      h("h2", {}, "Held"),
      h("p", { class: "stat-value stat-secondary", testid: "balance-held" }, formatUsd(me.balance.held, me.balance.held_base_units)),
      h("p", { class: "muted" }, "Reserved by calls in flight"),
    ),
  );
}

function depositCard(ctx: PageContext, me: Me, refresh: () => Promise<void>): HTMLElement {
  if (!me.wallet) return card("Deposit USDC", muted("This account has no wallet address yet."));
  const qr = h("img", {
    src: "/v1/wallet/qr.svg",
    alt: "QR code of your wallet address",
    class: "qr",
    width: 168,
    height: 168,
    testid: "wallet-qr",
  });
  qr.addEventListener("error", () => qr.classList.add("qr-missing"));
  const parts: HTMLElement[] = [
    h("p", {}, "Send USDC to your wallet on the gateway's chain; it is moved into your balance automatically."),
    h(
      "div",
      { class: "deposit" },
      qr,
      h(
        "div",
        { class: "deposit-address" },
        h("span", { class: "field-label" }, "Your wallet address"),
        h(
          "div",
          { class: "secret" },
          h("code", { class: "mono mono-full", testid: "wallet-address" }, me.wallet.address),
          copyButton(me.wallet.address, { class: "btn btn-small" }),
        ),
      ),
    ),
  ];
  // A wallet owned by the person's own key (SIWE) cannot be swept by the gateway: they sign the move.
  if (me.wallet.owner === "siwe" && me.wallet.owner_address) parts.push(sweepButton(ctx, me.wallet.owner_address, refresh));
  return card("Deposit USDC", ...parts);
}

function sweepButton(ctx: PageContext, owner: string, refresh: () => Promise<void>): HTMLElement {
  const button = h("button", { type: "button", class: "btn", testid: "sweep-button" }, "Move wallet USDC to my balance");
  button.addEventListener("click", () =>
    busy(button, async () => {
      try {
        const prepared = await post<{ user_op_hash: string }>("/v1/wallet/sweep/prepare");
        let signature: string;
        try {
          signature = await personalSign(prepared.user_op_hash, owner);
        } catch (error) {
          return ctx.fail(walletError(error));
        }
        await post("/v1/wallet/sweep/submit", { user_op_hash: prepared.user_op_hash, signature });
        ctx.notice("Sent: the USDC reaches your balance once the deposit is mined.");
        await refresh();
      } catch (error) {
        ctx.fail(error);
      }
    }),
  );
  return h("div", { class: "actions" }, button);
}

function cardTopupCard(ctx: PageContext, refresh: () => Promise<void>): HTMLElement {
  const amount = h("input", { type: "text", inputmode: "decimal", value: "10.00", autocomplete: "off", testid: "card-amount" });
  const number = h("input", {
    type: "text",
    inputmode: "numeric",
    autocomplete: "cc-number",
    placeholder: "4242 4242 4242 4242",
    testid: "card-number",
  });
  const submit = h("button", { type: "submit", class: "btn btn-primary", testid: "card-submit" }, "Top up");
  const result = h("p", { class: "result", testid: "card-result", role: "status" });
  const amountField = formField("Amount (USD)", amount, "Up to 2 decimals.");
  let bounds: { min?: bigint; max?: bigint } = {};
  // The bounds are the gateway's (GET /v1/platform): the escrow's minimum deposit, and the largest card top-up.
  void platformInfo().then((platform) => {
    const min = platform?.min_deposit == null ? undefined : usdToBaseUnits(platform.min_deposit);
    const max = platform?.card_topup_max === undefined ? undefined : usdToBaseUnits(platform.card_topup_max);
    bounds = { min, max };
    const hint = amountField.querySelector(".hint");
    if (hint && min !== undefined && max !== undefined)
      hint.textContent = `From ${formatBaseUnits(min)} (the minimum deposit) to ${formatBaseUnits(max)}, up to 2 decimals.`;
  });
  const form = validatedForm(
    { class: "stack", testid: "card-form" },
    amountField,
    formField("Card number", number, "Sandbox: 4242 4242 4242 4242 succeeds, 4000 0000 0000 0002 is declined. No real card is charged."),
    h("div", { class: "actions" }, submit),
    result,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearErrors(form);
    const units = typedUsd(amount.value, 2);
    const problems: [Control, string][] = [];
    if (units === undefined || units === 0n) problems.push([amount, "Enter an amount in dollars, with up to 2 decimals, e.g. 10.00."]);
    else if (bounds.min !== undefined && units < bounds.min)
      problems.push([amount, `The minimum top-up is ${formatBaseUnits(bounds.min)} (the escrow's minimum deposit).`]);
    else if (bounds.max !== undefined && units > bounds.max)
      problems.push([amount, `The largest top-up is ${formatBaseUnits(bounds.max)}.`]);
    const digits = number.value.replace(/[\s-]/g, "");
    if (!/^\d{12,19}$/.test(digits)) problems.push([number, "Enter the card number: 12 to 19 digits."]);
    for (const [control, message] of problems.reverse()) fieldError(control, message);
    if (problems.length > 0) return;
    void busy(
      submit,
      async () => {
        result.textContent = "";
        try {
          const checkout = await post<CardCheckout>("/v1/topups/card", { amount: amount.value.trim(), card: number.value.trim() });
          await followCheckout(ctx, checkout, result, refresh, (message) => fieldError(number, message));
        } catch (error) {
          formError(form, error, [
            [/card number|declined/i, number],
            [/amount|deposit|\$/i, amount],
          ]);
        }
      },
      "Paying…",
    );
  });
  return card("Top up by card", form);
}

/**
 * Shows a checkout's outcome, and waits for a paid one to be credited (mined, then indexed). A declined card is
 * the card's error: `cardError` shows it under the card number.
 */
async function followCheckout(
  ctx: PageContext,
  first: CardCheckout,
  result: HTMLElement,
  refresh: () => Promise<void>,
  cardError: (message: string) => void,
): Promise<void> {
  const amount = formatUsd(first.amount);
  let checkout = first;
  const deadline = Date.now() + CREDIT_WAIT_MS;
  for (;;) {
    if (checkout.status === "declined") {
      result.textContent = "";
      cardError(`Declined${checkout.decline_code ? ` (${checkout.decline_code.replace(/_/g, " ")})` : ""}: nothing was charged.`);
      // The declined attempt is in the history now.
      await refresh();
      return;
    }
    if (checkout.status === "abandoned") {
      result.textContent = "";
      cardError("The checkout expired before it was paid: nothing was charged.");
      return;
    }
    if (checkout.credited) {
      result.className = "result result-ok";
      result.textContent = `Paid: ${amount} added to your balance.`;
      await refresh();
      return;
    }
    result.className = "result";
    result.textContent = checkout.status === "created" ? "Waiting for the card payment…" : `Paid: crediting ${amount} to your balance…`;
    if (Date.now() > deadline || !ctx.isCurrent()) {
      result.textContent = `Paid: ${amount} will appear in your balance once the deposit is confirmed.`;
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    checkout = await get<CardCheckout>(`/v1/topups/card/${encodeURIComponent(first.id)}`);
  }
}

/** What a withdrawal to an address answers, from either path. */
type WithdrawnTo = { amount: number; amount_base_units: string; to: string; nonce: string; user_op_hash: string; tx_hash: string };

/**
 * With an embedded wallet the withdrawal goes to an address the person types: the gateway redeems the voucher from
 * the wallet and passes the USDC on in one operation (a plain voucher would pay the wallet, whose USDC is swept back
 * into the balance). Without one, the plain voucher path stays.
 */
function withdrawCard(me: Me, list: HTMLElement, after: () => Promise<void>): HTMLElement {
  const amount = h("input", {
    type: "text",
    inputmode: "decimal",
    placeholder: "All available",
    autocomplete: "off",
    testid: "withdraw-amount",
  });
  const submit = h("button", { type: "submit", class: "btn", testid: "withdraw-submit" }, "Withdraw");
  const result = h("div", { class: "result", testid: "withdraw-result", role: "status" });
  const wallet = me.wallet;
  const to = wallet
    ? h("input", {
        type: "text",
        placeholder: "0x…",
        spellcheck: false,
        autocomplete: "off",
        class: "mono",
        testid: "withdraw-to",
      })
    : undefined;
  const form = validatedForm(
    { class: "inline-form", testid: "withdraw-form" },
    formField("Amount (USD)", amount, "Up to 6 decimals; empty withdraws everything available."),
    ...(to ? [formField("To address", to, "The USDC is sent to this address on the escrow's chain.")] : []),
    formAction(submit),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearErrors(form);
    const value = amount.value.trim();
    const problems: [Control, string][] = [];
    const units = value === "" ? undefined : typedUsd(value);
    if (value !== "" && (units === undefined || units === 0n))
      problems.push([amount, "Enter an amount in dollars with up to 6 decimals, e.g. 1.50, or leave it empty to withdraw everything."]);
    else if (units !== undefined) {
      const available = availableUnits(me);
      if (available !== undefined && units > available)
        problems.push([amount, `Only ${formatBaseUnits(available)} is available to withdraw.`]);
    }
    const target = to?.value.trim() ?? "";
    if (to && !/^0x[0-9a-fA-F]{40}$/.test(target))
      problems.push([to, "Enter the address to send the USDC to: 0x followed by 40 hexadecimal characters."]);
    for (const [control, message] of problems.reverse()) fieldError(control, message);
    if (problems.length > 0) return;
    void busy(
      submit,
      async () => {
        replaceChildren(result);
        try {
          if (to) {
            const body = value ? { amount: value, to: target } : { to: target };
            const sent = await withdrawTo(me, body);
            replaceChildren(
              result,
              h("p", {}, `Sent ${formatUsd(sent.amount, sent.amount_base_units)} to `, h("code", { class: "mono" }, sent.to), "."),
              h("p", { class: "muted" }, "Transaction:"),
              h("code", { class: "mono mono-full", testid: "withdraw-tx" }, sent.tx_hash),
            );
            to.value = "";
          } else {
            const issued = await post<IssuedVoucher>("/v1/withdrawals", value ? { amount: value } : {});
            replaceChildren(
              result,
              h(
                "p",
                {},
                `Voucher for ${formatUsd(issued.amount)} issued, valid until ${formatDateTime(issued.expires_at)}. Status: issued.`,
              ),
              h("p", { class: "muted" }, "Submit it to the escrow's withdrawWithVoucher from any wallet; the USDC goes to your address."),
              h("div", { class: "mono-wrap" }, monoValue(issued.signature, {}, { copy: false }), copyVoucher(issued)),
            );
          }
          amount.value = "";
          await after();
        } catch (error) {
          // The address's refusals start "to must…"; the amount's name it, the balance, or a dollar figure.
          formError(form, error, [...(to ? ([[/^to\b/i, to]] as const) : []), [/amount|available|\$/i, amount]]);
          await after();
        }
      },
      "Withdrawing…",
    );
  });
  const intro = wallet
    ? "The amount leaves your balance and the escrow pays it, through your wallet, to the address you enter, in one transaction. The gateway pays the gas."
    : "A withdrawal is a voucher signed by the gateway: the amount leaves your balance at once and the escrow pays it to your address.";
  return card("Withdraw", h("p", {}, intro), form, result, list);
}

/** What the page last knew was available, in base units (the header's /v1/me), or undefined. */
function availableUnits(me: Me): bigint | undefined {
  const latest = currentMe() ?? me;
  const { available, available_base_units } = latest.balance;
  return available_base_units !== undefined ? parseBaseUnits(available_base_units) : usdToBaseUnits(available);
}

/**
 * Withdraws to an address. A wallet the gateway holds the key of is sent in one call; a wallet owned by the
 * person's own key (SIWE) needs their signature on the UserOperation (prepare, personal_sign, submit). Throws
 * what went wrong, in plain words, for the form to show.
 */
async function withdrawTo(me: Me, body: { amount?: string; to: string }): Promise<WithdrawnTo> {
  if (me.wallet?.owner !== "siwe") return post<WithdrawnTo>("/v1/wallet/withdraw", body);
  const prepared = await post<{ user_op_hash: string }>("/v1/wallet/withdraw/prepare", body);
  let signature: string;
  try {
    signature = await personalSign(prepared.user_op_hash, me.wallet.owner_address ?? "");
  } catch (error) {
    throw new Error(`${walletError(error)} The amount is held in a voucher that returns to your balance after it expires.`);
  }
  return post<WithdrawnTo>("/v1/wallet/withdraw/submit", { user_op_hash: prepared.user_op_hash, signature });
}

function copyVoucher(issued: IssuedVoucher): HTMLElement {
  const json = JSON.stringify(
    { escrow: issued.escrow, chain_id: issued.chain_id, voucher: issued.voucher, signature: issued.signature },
    null,
    2,
  );
  const button = h("button", { type: "button", class: "btn btn-small btn-ghost" }, "Copy voucher");
  button.addEventListener("click", async () => {
    button.textContent = (await copyText(json)) ? "Copied" : "Copy failed";
  });
  return button;
}

async function loadWithdrawals(ctx: PageContext, box: HTMLElement): Promise<void> {
  try {
    const items = await get<Withdrawal[]>("/v1/withdrawals");
    if (items.length === 0) return replaceChildren(box);
    const headers = ["Created", "Amount", "Status", "Expires", "To"];
    replaceChildren(
      box,
      h("h3", {}, "Your vouchers"),
      table(
        { class: "table" },
        headers,
        items.map((w) =>
          row({}, headers, [
            formatDateTime(w.created_at),
            formatUsd(w.amount),
            statusBadge(w.status),
            formatDateTime(w.expires_at),
            monoValue(w.address, {}, { copy: false }),
          ]),
        ),
      ),
    );
  } catch (error) {
    replaceChildren(box);
    ctx.fail(error);
  }
}

const TYPE_LABEL: Record<string, string> = {
  deposit: "Deposit",
  card_topup: "Card top-up",
  charge: "Charge",
  withdrawal: "Withdrawal",
  exit: "Exit",
};

async function loadHistory(ctx: PageContext, box: HTMLElement): Promise<void> {
  box.setAttribute("aria-busy", "true");
  try {
    const { items } = await get<{ items: HistoryItem[] }>("/v1/history?limit=50");
    if (items.length === 0) return replaceChildren(box, muted("No money has moved yet — top up above to get started."));
    const headers = ["Time", "Type", "Description", "Amount", "Status", "Tx"];
    replaceChildren(
      box,
      table(
        { class: "table", testid: "history" },
        headers,
        items.map((item) =>
          row({ testid: "history-row" }, headers, [
            formatDateTime(item.created_at),
            TYPE_LABEL[item.type] ?? item.type,
            item.description,
            h(
              "span",
              {
                class:
                  item.amount < 0 || item.amount_base_units?.startsWith("-") ? "amount-neg" : item.amount === 0 ? "muted" : "amount-pos",
              },
              formatUsd(item.amount, item.amount_base_units),
            ),
            statusBadge(item.status),
            item.tx_hash ? monoValue(item.tx_hash) : "—",
          ]),
        ),
      ),
    );
  } catch (error) {
    replaceChildren(box, muted("History is unavailable right now."));
    ctx.fail(error);
  } finally {
    box.removeAttribute("aria-busy");
  }
}
