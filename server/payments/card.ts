/**
 * Card top-ups: a payment-provider interface, the sandbox provider the gateway uses by default, and the
 * gateway's side of a checkout (`CardTopups`).
 *
 * The path of one top-up: the gateway opens a checkout at the provider for an amount (refused below the
 * escrow's `minDeposit`), the card is charged, and the provider tells the gateway the outcome in a
 * notification signed with an HMAC secret both share. A `paid` notification makes the gateway fund the
 * account on-chain: its funding wallet (on the local chain the TestUSDC owner) mints that much test USDC to
 * itself and calls `depositFor(account's address, amount)` on the escrow. The ledger credit then comes from
 * the deposit indexer reading the `Deposited` event, exactly once, like any other deposit: nothing here
 * writes to the ledger. Minting to the funding wallet rather than to the account's own wallet is deliberate:
 * moving USDC out of the account's wallet needs the embedded-wallet UserOperation path; the money lands in
 * the same escrow balance either way.
 *
 * Exactly once: a checkout moves out of `created` once (a conditional UPDATE), and only that move funds
 * it, so a repeated notification changes nothing. The funding transactions' hashes are recorded as soon as
 * they are sent, so a retry after a failure resumes instead of sending them again.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { maxUint256, type Account, type Address, type Chain, type Hash, type Transport, type WalletClient } from "viem";
import { skillEscrowAbi, testUsdcAbi } from "../chain/abi";
import { settlementStores } from "../settlement/store";
import type { ChainConnection } from "../settlement/money-path";
import type { Ledger } from "../ledger/ledger";
import { microsToUsd } from "../ledger/money";
import { type Refusal, refusal } from "../errors";
import { type CheckoutRecord, type CheckoutStatus, type CheckoutsStore, SqliteCheckoutsStore } from "./checkouts-store";

/** Where a checkout is: `created` until the provider reports; `paid` until the deposit is mined, then `funded`. */

/** Why a card was declined, in the words card processors' test modes use. */
export type DeclineCode = "card_declined" | "insufficient_funds";

/** What the provider tells the gateway about a checkout, as the JSON body of a signed notification. */
export interface CardNotification {
  /** The provider's id of this event (a redelivery repeats it). */
  eventId: string;
  checkoutId: string;
  /** `expired`: nobody paid before the checkout lapsed (abandoned). */
  outcome: "paid" | "declined" | "expired";
  /** What was charged, in base units, as a decimal string. */
  amountMicros: string;
  declineCode?: DeclineCode;
  createdAtSec: number;
}

/** What the payer does next: enter a card on the gateway's form (the sandbox), or go to the provider's page. */
export type CheckoutNextStep = { kind: "card_entry" } | { kind: "redirect"; url: string };

export type CreateCheckoutParameters = { amountMicros: bigint; accountId: string };
export type CreateCheckoutReturnType = { checkoutId: string; next: CheckoutNextStep; expiresAtMs: number };

export type SubmitCardReturnType = { ok: true } | { ok: false; reason: "invalid_card_number" | "checkout_closed" | "unknown_checkout" };

/**
 * A card processor as the gateway sees it. It opens checkouts and later reports each one's outcome by a
 * notification signed with `signNotification` under the secret the two share.
 */
export interface PaymentProvider {
  readonly name: string;
  createCheckout(parameters: CreateCheckoutParameters): Promise<CreateCheckoutReturnType>;
  /** Takes a card number for a checkout; only providers whose checkout form is the gateway's own (the sandbox). */
  submitCard?(checkoutId: string, cardNumber: string): Promise<SubmitCardReturnType>;
}

/** The header a notification's signature travels in: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`. */
export const CARD_SIGNATURE_HEADER = "x-card-signature";
/** How old a signed notification may be: a captured one cannot be replayed after this. */
export const NOTIFICATION_TOLERANCE_SEC = 300;

const mac = (secret: Buffer, timestampSec: number, body: string) =>
  createHmac("sha256", secret).update(`${timestampSec}.${body}`).digest("hex");

/** Signs a notification body the way the provider does (Stripe-style: the timestamp is signed too). */
export function signNotification(secret: Buffer, body: string, timestampSec: number = Math.floor(Date.now() / 1000)): string {
  return `t=${timestampSec},v1=${mac(secret, timestampSec, body)}`;
}

/** Whether `header` is a valid signature of `body` under `secret`, made within the tolerance of `nowSec`. */
export function verifyNotification(
  secret: Buffer,
  body: string,
  header: string | undefined,
  nowSec: number = Math.floor(Date.now() / 1000),
): boolean {
  if (!header) return false;
  const parts = new Map(header.split(",").map((part) => part.trim().split("=", 2) as [string, string]));
  const t = parts.get("t");
  const v1 = parts.get("v1");
  if (!t || !/^\d{1,12}$/.test(t) || !v1 || !/^[0-9a-f]{64}$/.test(v1)) return false;
  const timestampSec = Number(t);
  if (Math.abs(nowSec - timestampSec) > NOTIFICATION_TOLERANCE_SEC) return false;
  return timingSafeEqual(Buffer.from(v1, "hex"), Buffer.from(mac(secret, timestampSec, body), "hex"));
}

/** The sandbox's test cards, as card processors' test modes define them. Any other number is invalid. */
export const SANDBOX_CARDS: Readonly<Record<string, { outcome: "paid" } | { outcome: "declined"; declineCode: DeclineCode }>> = {
  "4242424242424242": { outcome: "paid" },
  "4000000000000002": { outcome: "declined", declineCode: "card_declined" },
  "4000000000009995": { outcome: "declined", declineCode: "insufficient_funds" },
};

/** How long a checkout stays open before it counts as abandoned. */
export const DEFAULT_CHECKOUT_TTL_MS = 30 * 60_000;

export type SandboxCardProviderParameters = {
  secret: Buffer;
  /** Sends a signed notification to the gateway (its notification endpoint, or the handler behind it). */
  deliver: (body: string, signature: string) => Promise<unknown>;
  checkoutTtlMs?: number;
  now?: () => number;
};

/**
 * A payment provider in test mode: no money moves, the test card numbers decide the outcome, and the outcome
 * reaches the gateway as a signed notification, like a real provider's webhook. Each checkout completes
 * once; the notifications it sent are kept in `deliveries` (a test can replay one).
 */
export class SandboxCardProvider implements PaymentProvider {
  readonly name = "sandbox";
  readonly deliveries: { body: string; signature: string }[] = [];
  private readonly checkouts = new Map<string, { amountMicros: bigint; expiresAtMs: number; done: boolean }>();
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(private readonly parameters: SandboxCardProviderParameters) {
    this.ttlMs = parameters.checkoutTtlMs ?? DEFAULT_CHECKOUT_TTL_MS;
    this.now = parameters.now ?? Date.now;
  }

  async createCheckout({ amountMicros }: CreateCheckoutParameters): Promise<CreateCheckoutReturnType> {
    const checkoutId = `cs_test_${randomBytes(18).toString("base64url")}`;
    const expiresAtMs = this.now() + this.ttlMs;
    this.checkouts.set(checkoutId, { amountMicros, expiresAtMs, done: false });
    return { checkoutId, next: { kind: "card_entry" }, expiresAtMs };
  }

  async submitCard(checkoutId: string, cardNumber: string): Promise<SubmitCardReturnType> {
    const checkout = this.checkouts.get(checkoutId);
    if (!checkout) return { ok: false, reason: "unknown_checkout" };
    if (checkout.done) return { ok: false, reason: "checkout_closed" };
    if (this.now() >= checkout.expiresAtMs) {
      checkout.done = true;
      await this.notify({ checkoutId, outcome: "expired", amountMicros: checkout.amountMicros });
      return { ok: false, reason: "checkout_closed" };
    }
    // A number that is not a test card is refused at entry, as a processor refuses a mistyped one: the
    // checkout stays open for another try.
    const card = SANDBOX_CARDS[cardNumber.replace(/[\s-]/g, "")];
    if (!card) return { ok: false, reason: "invalid_card_number" };
    checkout.done = true;
    await this.notify({ checkoutId, amountMicros: checkout.amountMicros, ...card });
    return { ok: true };
  }

  private async notify(event: {
    checkoutId: string;
    outcome: CardNotification["outcome"];
    amountMicros: bigint;
    declineCode?: DeclineCode;
  }) {
    const notification: CardNotification = {
      eventId: `evt_test_${randomBytes(12).toString("base64url")}`,
      checkoutId: event.checkoutId,
      outcome: event.outcome,
      amountMicros: event.amountMicros.toString(),
      ...(event.declineCode ? { declineCode: event.declineCode } : {}),
      createdAtSec: Math.floor(this.now() / 1000),
    };
    const body = JSON.stringify(notification);
    const signature = signNotification(this.parameters.secret, body, Math.floor(this.now() / 1000));
    this.deliveries.push({ body, signature });
    await this.parameters.deliver(body, signature);
  }
}

/** A checkout as the gateway records it. */
export type CardCheckout = CheckoutRecord;

export type StartCheckoutReturnType =
  | { ok: true; checkout: CardCheckout; next: CheckoutNextStep }
  /**
   * chain_not_configured (no chain, or no funding wallet on it: card top-ups cannot be funded), no_deposit_address
   * (no linked address for the escrow to credit), amount_below_minimum, invalid_request (a card number the
   * provider refuses; the checkout stays open).
   */
  | Refusal<"chain_not_configured" | "no_deposit_address" | "amount_below_minimum" | "invalid_request">;

export type ReceiveNotificationReturnType =
  | { ok: true; checkout: CardCheckout; duplicate: boolean }
  /** invalid_signature, not_found (no such checkout), invalid_request (malformed, or another amount than asked). */
  | Refusal<"invalid_signature" | "not_found" | "invalid_request">;

type Wallet = WalletClient<Transport, Chain | undefined, Account>;

export type CardTopupsParameters = {
  ledger: Ledger;
  provider: PaymentProvider;
  /** The HMAC secret notifications are signed with, shared with the provider. */
  secret: Buffer;
  chain?: ChainConnection;
  log: (message: string, error?: unknown) => void;
  now?: () => number;
  /** Where checkouts are kept; by default the `card_checkouts` table of the ledger's database. */
  store?: CheckoutsStore;
};

/** The gateway's side of card top-ups: opening checkouts, taking the provider's notifications, funding. */
export class CardTopups {
  readonly provider: PaymentProvider;
  private readonly ledger: Ledger;
  private readonly store: CheckoutsStore;
  private readonly secret: Buffer;
  private readonly chain: ChainConnection | undefined;
  private readonly log: CardTopupsParameters["log"];
  private readonly now: () => number;
  /** Funding runs one checkout at a time: the funding wallet's transactions must not race for nonces. */
  private fundingQueue: Promise<unknown> = Promise.resolve();
  private readonly funding = new Map<string, Promise<void>>();
  private usdc: Address | undefined;

  constructor(parameters: CardTopupsParameters) {
    this.ledger = parameters.ledger;
    this.provider = parameters.provider;
    this.secret = parameters.secret;
    this.chain = parameters.chain;
    this.log = parameters.log;
    this.now = parameters.now ?? Date.now;
    this.store = parameters.store ?? new SqliteCheckoutsStore(parameters.ledger.db);
  }

  /**
   * Opens a checkout for `amountMicros` and, given a card number and a provider that takes one, pays it.
   * Refused without a linked address or below the escrow's minimum deposit: no checkout is opened then.
   */
  async start(accountId: string, amountMicros: bigint, cardNumber?: string): Promise<StartCheckoutReturnType> {
    const chain = this.chain;
    if (!chain?.fundingWallet) return refusal("chain_not_configured", "Card top-ups are not available: the gateway has no funding wallet.");
    const address = settlementStores(this.ledger.db).addresses.addressesOf(accountId)[0];
    if (!address) return refusal("no_deposit_address", "This account has no wallet address for the escrow to credit yet.");
    const minimumMicros = await chain.publicClient.readContract({
      address: chain.escrowAddress,
      abi: skillEscrowAbi,
      functionName: "minDeposit",
    });
    if (amountMicros < minimumMicros) return refusal("amount_below_minimum", `The minimum deposit is ${microsToUsd(minimumMicros)} USD.`);

    const created = await this.provider.createCheckout({ amountMicros, accountId });
    const nowMs = this.now();
    this.ledger.commit.run(() =>
      this.store.insertCreated({
        id: created.checkoutId,
        provider: this.provider.name,
        accountId,
        address,
        amountMicros,
        nowMs,
        expiresAtMs: created.expiresAtMs,
      }),
    );
    await this.ledger.commit.durable();

    if (cardNumber !== undefined && this.provider.submitCard) {
      const submitted = await this.provider.submitCard(created.checkoutId, cardNumber);
      if (!submitted.ok && submitted.reason === "invalid_card_number") {
        return refusal("invalid_request", "That card number is not valid (the sandbox takes its test cards only).");
      }
    }
    return { ok: true, checkout: this.get(accountId, created.checkoutId)!, next: created.next };
  }

  /**
   * Takes one provider notification (the raw body and its signature header). A verified first report moves
   * the checkout out of `created`; a `paid` one is then funded before this resolves. A repeated report
   * changes nothing (it only resumes funding that failed earlier).
   */
  async receive(body: string, signature: string | undefined): Promise<ReceiveNotificationReturnType> {
    if (!verifyNotification(this.secret, body, signature, Math.floor(this.now() / 1000)))
      return refusal("invalid_signature", "The notification's signature does not verify.");
    const notification = parseNotification(body);
    if (!notification) return refusal("invalid_request", "Malformed notification.");
    const row = this.read(notification.checkoutId);
    if (!row) return refusal("not_found", "No such checkout.");
    if (BigInt(notification.amountMicros) !== row.amountMicros) {
      this.log(
        `card checkout ${row.id}: the provider reported ${notification.amountMicros} base units, ${row.amountMicros} were asked for`,
      );
      return refusal("invalid_request", "The amount does not match the checkout.");
    }

    const status: Exclude<CheckoutStatus, "created" | "funded"> =
      notification.outcome === "paid" ? "paid" : notification.outcome === "declined" ? "declined" : "abandoned";
    const moved = this.ledger.commit.run(() => this.store.settleCreated(row.id, status, notification.declineCode ?? null, this.now()));
    await this.ledger.commit.durable();
    if (!moved && row.status !== "paid") return { ok: true, checkout: this.read(row.id)!, duplicate: true };
    if (moved && status !== "paid") return { ok: true, checkout: this.read(row.id)!, duplicate: false };

    // Paid (now, or earlier with funding still to finish): fund it. A failure leaves it `paid` for the next
    // notification or a retry to resume; the provider's notification was still taken.
    try {
      await this.fund(row.id);
    } catch (error) {
      this.log(`card checkout ${row.id}: funding failed, it stays paid and will be retried`, error);
    }
    return { ok: true, checkout: this.read(row.id)!, duplicate: !moved };
  }

  /** The account's checkout, `abandoned` once it lapsed unpaid; undefined if it is another account's. */
  get(accountId: string, checkoutId: string): CardCheckout | undefined {
    const checkout = this.read(checkoutId);
    if (!checkout || checkout.accountId !== accountId) return undefined;
    if (checkout.status === "created" && this.now() >= checkout.expiresAtMs) {
      this.ledger.commit.run(() => this.store.settleCreated(checkoutId, "abandoned", null, this.now()));
      return this.read(checkoutId);
    }
    return checkout;
  }

  /** Funds a paid checkout once; concurrent calls for one checkout share the same run. */
  fund(checkoutId: string): Promise<void> {
    const running = this.funding.get(checkoutId);
    if (running) return running;
    const run = this.fundingQueue.then(() => this.fundOnce(checkoutId)).finally(() => this.funding.delete(checkoutId));
    this.fundingQueue = run.catch(() => undefined);
    this.funding.set(checkoutId, run);
    return run;
  }

  private async fundOnce(checkoutId: string): Promise<void> {
    const chain = this.chain;
    const wallet = chain?.fundingWallet;
    if (!chain || !wallet) throw new Error("no funding wallet");
    let checkout = this.read(checkoutId);
    if (checkout?.status !== "paid") return;
    const client = chain.publicClient;
    const amount = checkout.amountMicros;
    const confirm = async (what: string, hash: Hash) => {
      const receipt = await client.waitForTransactionReceipt({ hash });
      if (receipt.status !== "success") throw new Error(`${what} reverted (transaction ${hash})`);
    };

    if (checkout.depositTx) {
      // Sent before a failure: its receipt decides. Mined: funded. Reverted: send again below.
      const receipt = await client.getTransactionReceipt({ hash: checkout.depositTx as Hash }).catch(() => undefined);
      if (receipt?.status === "success") return this.markFunded(checkoutId);
      if (!receipt) throw new Error(`deposit ${checkout.depositTx} is not mined yet`);
      await this.setTx(checkoutId, "deposit_tx", null);
      checkout = this.read(checkoutId)!;
    }
    this.usdc ??= await client.readContract({ address: chain.escrowAddress, abi: skillEscrowAbi, functionName: "usdc" });
    const usdc = this.usdc;
    const send = (address: Address, abi: typeof skillEscrowAbi | typeof testUsdcAbi, functionName: string, args: readonly unknown[]) =>
      (wallet as Wallet).writeContract({ address, abi, functionName, args, account: wallet.account, chain: wallet.chain } as never);

    if (!checkout.mintTx) {
      const hash = await send(usdc, testUsdcAbi, "mint", [wallet.account.address, amount]);
      await this.setTx(checkoutId, "mint_tx", hash);
      await confirm("minting test USDC", hash);
    }
    const allowance = await client.readContract({
      address: usdc,
      abi: testUsdcAbi,
      functionName: "allowance",
      args: [wallet.account.address, chain.escrowAddress],
    });
    if (allowance < amount)
      await confirm("approving the escrow", await send(usdc, testUsdcAbi, "approve", [chain.escrowAddress, maxUint256]));
    const hash = await send(chain.escrowAddress, skillEscrowAbi, "depositFor", [checkout.address as Address, amount]);
    await this.setTx(checkoutId, "deposit_tx", hash);
    await confirm("depositFor", hash);
    await this.markFunded(checkoutId);
  }

  private async setTx(checkoutId: string, column: "mint_tx" | "deposit_tx", hash: string | null): Promise<void> {
    this.ledger.commit.run(() => this.store.setFundingTx(checkoutId, column === "mint_tx" ? "mint" : "deposit", hash, this.now()));
    await this.ledger.commit.durable();
  }

  private async markFunded(checkoutId: string): Promise<void> {
    this.ledger.commit.run(() => this.store.markFunded(checkoutId, this.now()));
    await this.ledger.commit.durable();
  }

  private read(checkoutId: string): CardCheckout | undefined {
    return this.store.get(checkoutId);
  }
}

/** A notification body, checked field by field; undefined if it is not one. */
function parseNotification(body: string): CardNotification | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  const n = value as Partial<CardNotification> | null;
  if (!n || typeof n !== "object") return undefined;
  if (typeof n.checkoutId !== "string" || typeof n.eventId !== "string") return undefined;
  if (n.outcome !== "paid" && n.outcome !== "declined" && n.outcome !== "expired") return undefined;
  if (typeof n.amountMicros !== "string" || !/^[1-9]\d{0,17}$/.test(n.amountMicros)) return undefined;
  if (n.declineCode !== undefined && n.declineCode !== "card_declined" && n.declineCode !== "insufficient_funds") return undefined;
  return n as CardNotification;
}

/**
 * The default wiring: a sandbox provider whose notifications go straight to the gateway's notification
 * handler (the same verification the HTTP endpoint runs), under a secret made for this process.
 */
export function createSandboxCardTopups(
  parameters: Omit<CardTopupsParameters, "provider" | "secret"> & { checkoutTtlMs?: number },
): CardTopups {
  const secret = randomBytes(32);
  const provider: SandboxCardProvider = new SandboxCardProvider({
    secret,
    checkoutTtlMs: parameters.checkoutTtlMs,
    now: parameters.now,
    // Called only after `topups` below exists: the sandbox delivers notifications asynchronously.
    deliver: (body, signature) => topups.receive(body, signature),
  });
  const topups: CardTopups = new CardTopups({ ...parameters, provider, secret });
  return topups;
}
