/**
 * The first visit's checklist, at the top of the Wallet page (where every sign-in lands): add
 * test funds, create a key, make a first call. One button each, so a new account's first paid
 * call is three clicks away. The key is shown once, with snippets for every client that have it
 * filled in; the call goes through the "try it" endpoint (POST /v1/skills/:slug/try) with that
 * key, and its answer is shown as an agent gets it. An account that has made a call before does
 * not see the checklist, nor one whose owner hid it in this browser.
 */

import { ApiFailure, get, post, request } from "../api";
import { busy, copyButton, h, replaceChildren } from "../dom";
import { formatLatency, formatUsd, parseBaseUnits, usdToBaseUnits } from "../format";
import type { PageContext } from "../page";
import { exampleInput } from "../schema";
import { refreshMe } from "../session";
import { snippetTabs } from "../snippet-tabs";
import type { ApiKey, CardCheckout, Me, Skill, UsageCall } from "../types";

/** The first top-up: a sandbox card payment (the gateway's card provider is the sandbox: test USDC, no real money). */
const TOP_UP_USD = "5.00";
/** The sandbox's test card that always succeeds (server/payments/sandbox-card.ts). */
const TEST_CARD = "4242424242424242";
const TEST_CARD_SHOWN = "4242 4242 4242 4242";
/** How long the checklist waits for the top-up to reach the balance (the chain mines, the indexer credits). */
const CREDIT_WAIT_MS = 90_000;
const POLL_MS = 1_000;

/**
 * The demo skills `npm start` lists, each with an input that shows what it does; the first one
 * this gateway lists is the first call. Elsewhere, the cheapest listed skill, with an input from
 * its schema.
 */
const FIRST_CALLS: ReadonlyArray<{ slug: string; input: Record<string, unknown> }> = [
  { slug: "uppercase", input: { text: "Hello from my first call" } },
  { slug: "echo", input: { hello: "world" } },
];

/** Stands for the key in snippets when the key's secret is not on this page (it is shown only at creation). */
const KEY_PLACEHOLDER = "$SKILL_GATEWAY_API_KEY";

const hiddenKey = (accountId: string) => `sg.getting-started-hidden.${accountId}`;

/** The checklist's place on the page; it fills in once it knows whether this is a first visit. */
export function gettingStarted(ctx: PageContext, me: Me, moneyMoved: () => Promise<void>): HTMLElement {
  const box = h("div", {});
  void load(ctx, box, me, moneyMoved);
  return box;
}

interface Progress {
  funded: boolean;
  called: boolean;
  key: { id: string; label: string; secret?: string } | undefined;
  skill: { slug: string; name: string; price: number; input: Record<string, unknown> } | undefined;
}

async function load(ctx: PageContext, box: HTMLElement, me: Me, moneyMoved: () => Promise<void>): Promise<void> {
  if (isHidden(me.account_id)) return;
  let keys: ApiKey[];
  let calls: UsageCall[];
  let skills: Skill[];
  try {
    [keys, { calls }, skills] = await Promise.all([
      get<ApiKey[]>("/v1/keys"),
      get<{ calls: UsageCall[] }>("/v1/usage?limit=1"),
      get<Skill[]>("/v1/skills"),
    ]);
  } catch {
    // A helper, not the page: the Wallet's own cards say what is unavailable.
    return;
  }
  if (calls.length > 0 || !ctx.isCurrent()) return;
  const progress: Progress = {
    funded: availableUnits(me) > 0n,
    called: false,
    key: keys[0] && { id: keys[0].id, label: `${keys[0].name || "(unnamed)"} — ${keys[0].prefix}…` },
    skill: firstCallSkill(skills),
  };
  replaceChildren(box, checklist(ctx, me.account_id, progress, moneyMoved));
}

/** The account's available balance in base units (exact when /v1/me sends them). */
function availableUnits(me: Me): bigint {
  const exact = me.balance.available_base_units === undefined ? undefined : parseBaseUnits(me.balance.available_base_units);
  return exact ?? usdToBaseUnits(me.balance.available) ?? 0n;
}

/** The first of FIRST_CALLS this gateway lists, else its cheapest skill. */
function firstCallSkill(skills: Skill[]): Progress["skill"] {
  const price = (skill: Skill) => skill.price_per_call ?? skill.price;
  for (const demo of FIRST_CALLS) {
    const skill = skills.find((s) => s.slug === demo.slug);
    if (skill) return { slug: skill.slug, name: skill.name, price: price(skill), input: demo.input };
  }
  const units = (skill: Skill) => usdToBaseUnits(price(skill)) ?? 0n;
  const cheapest = skills.reduce<Skill | undefined>(
    (best, skill) => (best === undefined || units(skill) < units(best) ? skill : best),
    undefined,
  );
  return cheapest && { slug: cheapest.slug, name: cheapest.name, price: price(cheapest), input: exampleInput(cheapest.input_schema) };
}

function isHidden(accountId: string): boolean {
  try {
    return localStorage.getItem(hiddenKey(accountId)) === "1";
  } catch {
    return false;
  }
}

/** One step of the list: its number (a check once done), title, text, and what it shows as it goes. */
function step(n: number, title: string, text: string) {
  const marker = h("span", { class: "check-marker", "aria-hidden": "true" }, String(n));
  const state = h("span", { class: "visually-hidden" }, "To do: ");
  const body = h("div", { class: "check-body" });
  const status = h("p", { class: "muted small", role: "status" });
  const error = h("p", { class: "field-error", role: "alert", hidden: true });
  const item = h(
    "li",
    { class: "check" },
    marker,
    h("div", { class: "check-main" }, h("h3", {}, state, title), h("p", { class: "muted small" }, text), body, status, error),
  );
  return {
    item,
    body,
    say(text: string) {
      status.textContent = text;
    },
    fail(text: string) {
      error.textContent = text;
      error.hidden = text === "";
    },
    done() {
      item.classList.add("check-done");
      marker.textContent = "✓";
      state.textContent = "Done: ";
    },
  };
}

function checklist(ctx: PageContext, accountId: string, progress: Progress, moneyMoved: () => Promise<void>): HTMLElement {
  const title = h("h2", { id: "getting-started-title" }, "Get started: your first paid call in three steps");
  const hide = h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "getting-started-hide" }, "Hide");
  const section = h(
    "section",
    { class: "card getting-started", "aria-labelledby": "getting-started-title", testid: "getting-started" },
    h("div", { class: "code-head" }, title, hide),
  );
  hide.addEventListener("click", () => {
    try {
      localStorage.setItem(hiddenKey(accountId), "1");
    } catch {
      /* Hidden for this page view only. */
    }
    section.remove();
  });

  const funds = step(
    1,
    "Add test funds",
    `A sandbox top-up with the test card ${TEST_CARD_SHOWN}: test USDC, no real money. The Wallet's cards below have the other ways.`,
  );
  const key = step(2, "Create an API key", "Your agents send it with every call. It is shown once: copy it somewhere safe.");
  const call = step(
    3,
    "Make a first call",
    progress.skill
      ? `Calls ${progress.skill.name} for ${formatUsd(progress.skill.price)} with your key, as an agent would.`
      : "No skill is listed on this gateway yet; list one on the Seller page.",
  );

  const topUp = h("button", { type: "button", class: "btn", testid: "getting-started-topup" }, `Add ${formatUsd(TOP_UP_USD)} test funds`);
  const create = h("button", { type: "button", class: "btn", testid: "getting-started-key" }, "Create a key");
  const callButton = h("button", { type: "button", class: "btn", testid: "getting-started-call" }, "Make a first call");
  const result = h("div", { testid: "getting-started-result", tabindex: -1, class: "check-result" });

  /** The next step's button is the primary one; the call needs money and a key, and until then says what is missing. */
  const update = () => {
    const next = !progress.funded ? topUp : !progress.key ? create : progress.called ? undefined : callButton;
    for (const button of [topUp, create, callButton]) button.classList.toggle("btn-primary", button === next);
    callButton.disabled = !progress.funded || !progress.key || !progress.skill;
    if (!progress.skill) callButton.hidden = true;
    const missing = [!progress.funded && "funds", !progress.key && "a key"].filter(Boolean).join(" and ");
    call.say(missing && progress.skill ? `Needs ${missing} first.` : "");
  };

  if (progress.funded) {
    funds.done();
    funds.say("Your balance has funds.");
  } else funds.body.append(topUp);
  topUp.addEventListener("click", () =>
    busy(topUp, async () => {
      funds.fail("");
      const credited = await addTestFunds(ctx, funds);
      if (!credited) return;
      progress.funded = true;
      topUp.remove();
      funds.done();
      await moneyMoved();
      update();
      (progress.key ? callButton : create).focus();
    }),
  );

  if (progress.key) {
    key.done();
    key.say(`You have a key: ${progress.key.label}. The snippets below call with it once you put it in ${KEY_PLACEHOLDER}.`);
    replaceChildren(key.body, keySnippets(progress, KEY_PLACEHOLDER));
  } else key.body.append(create);
  create.addEventListener("click", () =>
    busy(create, async () => {
      key.fail("");
      try {
        const created = await post<ApiKey>("/v1/keys", { name: "first key" });
        progress.key = { id: created.id, label: `first key — ${created.prefix}…`, secret: created.key };
      } catch (error) {
        return key.fail(error instanceof ApiFailure ? error.message : "The key could not be created; try again.");
      }
      key.done();
      replaceChildren(key.body, newKey(progress.key.secret ?? ""), keySnippets(progress, progress.key.secret ?? KEY_PLACEHOLDER));
      update();
      key.body.querySelector<HTMLElement>("[data-testid=getting-started-new-key]")?.focus();
    }),
  );

  call.body.append(callButton, result);
  callButton.addEventListener("click", () =>
    busy(callButton, async () => {
      call.fail("");
      replaceChildren(result);
      const answer = progress.skill && progress.key ? await firstCall(progress.skill, progress.key.id, call.fail) : undefined;
      if (!answer) return update();
      call.done();
      progress.called = true;
      const me = await refreshMe();
      await moneyMoved();
      replaceChildren(result, ...answer.view(me));
      title.textContent = "Done: your first paid call";
      result.focus();
      update();
      callButton.textContent = "Call again";
    }),
  );
  update();

  section.append(
    h("ol", { class: "checklist" }, funds.item, key.item, call.item),
    h(
      "p",
      { class: "muted small" },
      "Next: ",
      h("a", { href: "/marketplace" }, "browse the Marketplace"),
      " · ",
      h("a", { href: "/usage" }, "see your calls in Usage"),
      " · ",
      h("a", { href: "/docs", target: "_blank", rel: "noopener" }, "API reference"),
      " · the README's Clients section for the SDKs, the CLI and MCP.",
    ),
  );
  return section;
}

/** Pays the sandbox checkout with the test card and waits until the balance has it; false (and says why) otherwise. */
async function addTestFunds(ctx: PageContext, funds: ReturnType<typeof step>): Promise<boolean> {
  let checkout: CardCheckout;
  try {
    checkout = await post<CardCheckout>("/v1/topups/card", { amount: TOP_UP_USD, card: TEST_CARD });
  } catch (error) {
    funds.fail(error instanceof ApiFailure ? error.message : "The top-up could not start; try again.");
    return false;
  }
  const amount = formatUsd(checkout.amount);
  const deadline = Date.now() + CREDIT_WAIT_MS;
  for (;;) {
    if (checkout.status === "declined" || checkout.status === "abandoned") {
      funds.say("");
      funds.fail(
        checkout.status === "declined" ? "The test card was declined: nothing was charged." : "The checkout expired before it was paid.",
      );
      return false;
    }
    if (checkout.credited) {
      funds.say(`Paid: ${amount} added to your balance.`);
      return true;
    }
    funds.say(checkout.status === "created" ? "Paying with the test card…" : `Paid: crediting ${amount} to your balance…`);
    if (Date.now() > deadline || !ctx.isCurrent()) {
      funds.say(`Paid: ${amount} will appear in your balance once the deposit is confirmed. Reload this page then.`);
      return false;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    try {
      checkout = await get<CardCheckout>(`/v1/topups/card/${encodeURIComponent(checkout.id)}`);
    } catch (error) {
      funds.fail(error instanceof ApiFailure ? error.message : "The top-up's status could not be read; reload to see your balance.");
      return false;
    }
  }
}

/** The new key, this once, with its warning and copy button. */
function newKey(secret: string): HTMLElement {
  return h(
    "div",
    { class: "secret-box" },
    h("p", { class: "warning" }, "Copy this key now: it is shown only once. The gateway keeps only a hash of it."),
    h(
      "div",
      { class: "secret" },
      h("code", { class: "mono mono-full", tabindex: -1, testid: "getting-started-new-key" }, secret),
      copyButton(secret, { class: "btn btn-small", "aria-label": "Copy the key" }),
    ),
  );
}

/** The first call in every client, with `key` in it. */
function keySnippets(progress: Progress, key: string): HTMLElement | null {
  if (!progress.skill) return null;
  return h(
    "div",
    { class: "check-snippets" },
    h("p", { class: "small muted" }, "Call it from your code:"),
    snippetTabs({ origin: location.origin, key, slug: progress.skill.slug, input: progress.skill.input }),
  );
}

/** What POST /v1/skills/:slug/call answers (and /try with it): the skill's data and what it cost. */
interface CallAnswer {
  success?: boolean;
  data?: unknown;
  error?: string;
  metadata?: { cost?: number; responseTime?: number };
}

/** Makes the call; its answer as a view to show, or undefined after saying why it failed. */
async function firstCall(
  skill: NonNullable<Progress["skill"]>,
  keyId: string,
  fail: (text: string) => void,
): Promise<{ view(me: Me | null): HTMLElement[] } | undefined> {
  let answer: { status: number; body: unknown };
  try {
    answer = await request("POST", `/v1/skills/${encodeURIComponent(skill.slug)}/try`, { key_id: keyId, input: skill.input });
  } catch (error) {
    fail(error instanceof ApiFailure ? error.message : "The call could not be made; try again.");
    return undefined;
  }
  const body = (answer.body ?? {}) as CallAnswer;
  if (answer.status !== 200 || body.success !== true) {
    fail(typeof body.error === "string" ? body.error : `The call failed (HTTP ${answer.status}); nothing was charged.`);
    return undefined;
  }
  return {
    view: (me) => [
      h("p", { class: "small muted" }, `${skill.name} answered:`),
      h("pre", { class: "code code-wrap", testid: "getting-started-data" }, JSON.stringify(body.data, null, 2)),
      h(
        "p",
        { class: "success", testid: "getting-started-charged" },
        [
          `Charged ${formatUsd(body.metadata?.cost ?? 0)}`,
          me ? `balance ${formatUsd(me.balance.available, me.balance.available_base_units)}` : null,
          body.metadata?.responseTime !== undefined ? formatLatency(body.metadata.responseTime) : null,
        ]
          .filter(Boolean)
          .join(" · "),
      ),
    ],
  };
}
