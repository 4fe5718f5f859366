/**
 * The sandbox card provider the gateway uses by default: test mode, where no money moves and the card
 * processors' test card numbers decide each checkout's outcome, reported as a signed notification like a real
 * provider's webhook; and the default wiring of card top-ups to it.
 */
import { randomBytes } from "node:crypto";
import {
  type CardNotification,
  type CreateCheckoutParameters,
  type CreateCheckoutReturnType,
  type DeclineCode,
  type PaymentProvider,
  type SubmitCardReturnType,
  signNotification,
} from "./card-provider";
import { CardTopups, type CardTopupsParameters } from "./card-topups";

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
