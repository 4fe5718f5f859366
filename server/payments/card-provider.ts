/**
 * A card processor as the gateway sees it (`PaymentProvider`), and the protocol the two share: the checkout a
 * provider opens, and the outcome it reports in a notification signed with an HMAC secret both hold
 * (Stripe-style: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`, refused once older than the tolerance).
 * The gateway's side of a top-up is ./card-topups.ts; the sandbox provider used by default is ./sandbox-card.ts.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

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

/** A notification body, checked field by field; undefined if it is not one. */
export function parseNotification(body: string): CardNotification | undefined {
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
