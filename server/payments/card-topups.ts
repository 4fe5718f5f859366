/**
 * Card top-ups: the gateway's side of a checkout (`CardTopups`). The provider it talks to is behind the
 * interface of ./card-provider.ts (the sandbox provider of ./sandbox-card.ts by default).
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
 * Exactly once, across replicas: a checkout moves out of `created` once (a conditional UPDATE), so of two
 * deliveries of one notification (to one replica or two) exactly one moves it. Funding a paid checkout is
 * held under a lease kept in the checkout's row (CheckoutsStore.holdFunding): the replica that moved it holds
 * it, renews it before each transaction it sends, and another replica (a redelivery, a retry) takes it over
 * only once it has gone quiet for `fundingLeaseMs`. The funding transactions' hashes are recorded as soon as
 * they are sent, so a retry after a failure resumes instead of sending them again. No chain call is ever made
 * inside a database transaction: each step's write is a transaction of its own.
 */
import { maxUint256, type Account, type Address, type Chain, type Hash, type Transport, type WalletClient } from "viem";
import { skillEscrowAbi, testUsdcAbi } from "../chain/abi";
import { settlementStores } from "../settlement/store";
import type { ChainConnection } from "../settlement/money-path";
import type { Ledger } from "../ledger/ledger";
import { usdDisplay } from "../ledger/money";
import { type Refusal, refusal } from "../errors";
import { type CheckoutNextStep, type PaymentProvider, parseNotification, verifyNotification } from "./card-provider";
import { type CheckoutRecord, type CheckoutStatus, CheckoutsStore } from "./checkouts-store";

/** A checkout as the gateway records it: `created` until the provider reports; `paid` until the deposit is mined, then `funded`. */
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
  /**
   * How long a funder may go without a word (a write to the checkout) before another replica may take over
   * funding it. Longer than any one wait for a receipt (viem's default: 3 minutes). Default 5 minutes.
   */
  fundingLeaseMs?: number;
};

/** The default of CardTopupsParameters.fundingLeaseMs. */
export const FUNDING_LEASE_MS = 5 * 60_000;

/** The largest single card top-up: a sandbox guard against typos, not a business limit (GET /v1/platform says it). */
export const MAX_CARD_TOPUP_MICROS = 10_000n * 1_000_000n;

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
  /** The funding leases this process holds or held last: the checkout's `updated_at` as it last wrote it. */
  private readonly leases = new Map<string, number>();
  private readonly fundingLeaseMs: number;
  private usdc: Address | undefined;

  constructor(parameters: CardTopupsParameters) {
    this.ledger = parameters.ledger;
    this.provider = parameters.provider;
    this.secret = parameters.secret;
    this.chain = parameters.chain;
    this.log = parameters.log;
    this.now = parameters.now ?? Date.now;
    this.store = parameters.store ?? new CheckoutsStore(parameters.ledger.db);
    this.fundingLeaseMs = parameters.fundingLeaseMs ?? FUNDING_LEASE_MS;
  }

  /**
   * Opens a checkout for `amountMicros` and, given a card number and a provider that takes one, pays it.
   * Refused without a linked address or below the escrow's minimum deposit: no checkout is opened then.
   */
  async start(accountId: string, amountMicros: bigint, cardNumber?: string): Promise<StartCheckoutReturnType> {
    const chain = this.chain;
    if (!chain?.fundingWallet) return refusal("chain_not_configured", "Card top-ups are not available: the gateway has no funding wallet.");
    const address = (await settlementStores(this.ledger.db).addresses.addressesOf(accountId))[0];
    if (!address) return refusal("no_deposit_address", "This account has no wallet address for the escrow to credit yet.");
    const minimumMicros = await chain.publicClient.readContract({
      address: chain.escrowAddress,
      abi: skillEscrowAbi,
      functionName: "minDeposit",
    });
    if (amountMicros < minimumMicros) return refusal("amount_below_minimum", `The minimum deposit is ${usdDisplay(minimumMicros)}.`);

    const created = await this.provider.createCheckout({ amountMicros, accountId });
    const nowMs = this.now();
    await this.ledger.db.transaction(
      (tx) =>
        this.store.insertCreated(
          {
            id: created.checkoutId,
            provider: this.provider.name,
            accountId,
            address,
            amountMicros,
            nowMs,
            expiresAtMs: created.expiresAtMs,
          },
          tx,
        ),
      { durable: true },
    );

    if (cardNumber !== undefined && this.provider.submitCard) {
      const submitted = await this.provider.submitCard(created.checkoutId, cardNumber);
      if (!submitted.ok && submitted.reason === "invalid_card_number") {
        return refusal("invalid_request", "That card number is not valid (the sandbox takes its test cards only).");
      }
    }
    return { ok: true, checkout: (await this.get(accountId, created.checkoutId))!, next: created.next };
  }

  /**
   * Takes one provider notification (the raw body and its signature header). A verified first report moves
   * the checkout out of `created`; a `paid` one is then funded before this resolves. A repeated report
   * changes nothing (it only resumes funding that failed earlier, once no other replica is funding it).
   */
  async receive(body: string, signature: string | undefined): Promise<ReceiveNotificationReturnType> {
    if (!verifyNotification(this.secret, body, signature, Math.floor(this.now() / 1000)))
      return refusal("invalid_signature", "The notification's signature does not verify.");
    const notification = parseNotification(body);
    if (!notification) return refusal("invalid_request", "Malformed notification.");
    const row = await this.read(notification.checkoutId);
    if (!row) return refusal("not_found", "No such checkout.");
    if (BigInt(notification.amountMicros) !== row.amountMicros) {
      this.log(
        `card checkout ${row.id}: the provider reported ${notification.amountMicros} base units, ${row.amountMicros} were asked for`,
      );
      return refusal("invalid_request", "The amount does not match the checkout.");
    }

    const status: Exclude<CheckoutStatus, "created" | "funded"> =
      notification.outcome === "paid" ? "paid" : notification.outcome === "declined" ? "declined" : "abandoned";
    const stamp = await this.ledger.db.transaction(
      (tx) => this.store.settleCreated(row.id, status, notification.declineCode ?? null, this.now(), tx),
      { durable: true },
    );
    const moved = stamp !== undefined;
    // The move to `paid` is this process's funding lease, from the moment it was written.
    if (moved && status === "paid") this.leases.set(row.id, stamp);
    const current = (await this.read(row.id))!;
    if (current.status !== "paid") return { ok: true, checkout: current, duplicate: !moved };

    // Paid (now, or earlier with funding still to finish): fund it, unless another replica is. A failure
    // leaves it `paid` for the next notification or a retry to resume; the provider's notification was
    // still taken.
    try {
      await this.fund(row.id);
    } catch (error) {
      this.log(`card checkout ${row.id}: funding failed, it stays paid and will be retried`, error);
    }
    return { ok: true, checkout: (await this.read(row.id))!, duplicate: !moved };
  }

  /** The account's checkout, `abandoned` once it lapsed unpaid; undefined if it is another account's. */
  async get(accountId: string, checkoutId: string): Promise<CardCheckout | undefined> {
    const checkout = await this.read(checkoutId);
    if (!checkout || checkout.accountId !== accountId) return undefined;
    if (checkout.status === "created" && this.now() >= checkout.expiresAtMs) {
      // A notification landing meanwhile wins or loses the same conditional move: whichever comes first.
      await this.ledger.db.transaction((tx) => this.store.settleCreated(checkoutId, "abandoned", null, this.now(), tx));
      return this.read(checkoutId);
    }
    return checkout;
  }

  /**
   * Funds a paid checkout once; concurrent calls for one checkout share the same run. Does nothing when the
   * checkout is not paid, or while another replica holds its funding lease.
   */
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
    if (!(await this.holdLease(checkoutId))) return;
    let checkout = (await this.read(checkoutId))!;
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
      checkout = (await this.read(checkoutId))!;
    }
    this.usdc ??= await client.readContract({ address: chain.escrowAddress, abi: skillEscrowAbi, functionName: "usdc" });
    const usdc = this.usdc;
    const send = (address: Address, abi: typeof skillEscrowAbi | typeof testUsdcAbi, functionName: string, args: readonly unknown[]) =>
      (wallet as Wallet).writeContract({ address, abi, functionName, args, account: wallet.account, chain: wallet.chain } as never);

    if (!checkout.mintTx) {
      if (!(await this.holdLease(checkoutId))) return;
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
    if (allowance < amount) {
      if (!(await this.holdLease(checkoutId))) return;
      await confirm("approving the escrow", await send(usdc, testUsdcAbi, "approve", [chain.escrowAddress, maxUint256]));
    }
    if (!(await this.holdLease(checkoutId))) return;
    const hash = await send(chain.escrowAddress, skillEscrowAbi, "depositFor", [checkout.address as Address, amount]);
    await this.setTx(checkoutId, "deposit_tx", hash);
    await confirm("depositFor", hash);
    await this.markFunded(checkoutId);
  }

  /**
   * Takes or renews this process's lease on funding the checkout (CheckoutsStore.holdFunding), before each
   * transaction sent: false when the checkout is not paid any more, or another replica holds the lease (it
   * took over after this process went quiet too long): the funding is that replica's then.
   */
  private async holdLease(checkoutId: string): Promise<boolean> {
    const now = this.now();
    const held = this.leases.get(checkoutId);
    const stamp = await this.ledger.db.transaction((tx) => this.store.holdFunding(checkoutId, held, now - this.fundingLeaseMs, now, tx));
    if (stamp === undefined) {
      this.leases.delete(checkoutId);
      if (held !== undefined) this.log(`card checkout ${checkoutId}: another replica is funding it (or it is no longer paid); leaving it`);
      return false;
    }
    this.leases.set(checkoutId, stamp);
    return true;
  }

  /** Records a funding transaction as soon as it is sent, durably: a retry must find it rather than send another. */
  private async setTx(checkoutId: string, column: "mint_tx" | "deposit_tx", hash: string | null): Promise<void> {
    const stamp = await this.ledger.db.transaction(
      (tx) => this.store.setFundingTx(checkoutId, column === "mint_tx" ? "mint" : "deposit", hash, this.now(), tx),
      { durable: true },
    );
    if (stamp !== undefined) this.leases.set(checkoutId, stamp);
  }

  private async markFunded(checkoutId: string): Promise<void> {
    await this.ledger.db.transaction((tx) => this.store.markFunded(checkoutId, this.now(), tx), { durable: true });
    this.leases.delete(checkoutId);
  }

  private read(checkoutId: string): Promise<CardCheckout | undefined> {
    return this.store.get(checkoutId);
  }
}
