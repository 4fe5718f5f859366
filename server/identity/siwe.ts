/**
 * Sign-In With Ethereum (EIP-4361): the nonces the gateway hands out and the checks a signed
 * message must pass before it opens a session. The `siwe` package parses the message (its
 * ABNF grammar is the standard's); every check on the parsed fields is made here, each one
 * required, and the signature is verified by viem, so that smart accounts sign in too.
 */
import { randomBytes } from "node:crypto";
import { SiweMessage } from "siwe";
import { type Address, type Hex, type PublicClient, getAddress, isHex, verifyMessage } from "viem";
import type { Database } from "../db/sql";
import { base58Encode } from "./base58";
import { GatewayError } from "../errors";
import { SiweNoncesStore } from "./sign-in-store";

/** How long a nonce may wait for its signed message. */
export const SIWE_NONCE_TTL_MS = 10 * 60_000;

/**
 * How far a message's clock may run ahead of the gateway's: its `issuedAt` may be this much
 * in the future, no more. The nonce already makes every message fresh; this refuses one
 * whose timestamps are nonsense (issued in 2100), which a careful signer would not produce
 * and a reader of the signed text would be misled by. Five minutes is the customary bound
 * for clocks kept by NTP (Kerberos uses the same).
 */
export const SIWE_CLOCK_SKEW_MS = 5 * 60_000;

/** How many nonces may wait unused: per client address, and in all. */
export interface SiweNonceLimits {
  perClientMax: number;
  max: number;
}

export type IssueNonceReturnType =
  | { ok: true; nonce: string; expiresAtMs: number }
  /** As many nonces wait unused as the gateway keeps; one frees up in `retryAfterMs`. */
  | { ok: false; reason: "too_many_pending"; retryAfterMs: number };

/**
 * Server-issued SIWE nonces, one row each in `siwe_nonces`. A nonce is good once and until it
 * expires; `consume` checks both and marks it used in one conditional UPDATE, so of two requests
 * carrying the same message exactly one gets through, on one gateway or across replicas.
 *
 * Anyone may ask for a nonce, so the table must not grow with the asking: expired nonces go
 * as new ones are issued (and on the gateway's periodic prune); one client address holds at
 * most `perClientMax` unused ones (asking for another drops its oldest, so a person who
 * clicks "Connect wallet" again is never stuck); and beyond `max` unused ones in all, a new
 * one is refused until the oldest expires, rather than dropping other people's. (Replicas
 * issuing at the same instant on PostgreSQL each count without the others' uncommitted
 * nonces, so the bounds may be passed by as many nonces as issue at once: they bound a flood,
 * they are not exact quotas.)
 */
export class SiweNonces {
  private readonly store: SiweNoncesStore;

  constructor(
    private readonly db: Database,
    private readonly limits: SiweNonceLimits,
    private readonly ttlMs = SIWE_NONCE_TTL_MS,
  ) {
    this.store = new SiweNoncesStore(db);
  }

  /**
   * A fresh nonce for `client` (the asker's rate-limit key): 128 random bits in base58
   * (EIP-4361 wants at least 8 alphanumerics), or a refusal when too many wait unused.
   * Durable before it resolves.
   */
  async issue(client: string, nowMs = Date.now()): Promise<IssueNonceReturnType> {
    const nonce = base58Encode(randomBytes(16));
    const expiresAtMs = nowMs + this.ttlMs;
    const refusedFor = await this.db.transaction(
      async (tx): Promise<number | undefined> => {
        await this.store.purgeExpired(nowMs, tx);
        await this.store.trimClient(client, nowMs, this.limits.perClientMax - 1, tx);
        if ((await this.store.pendingCount(nowMs, tx)) >= this.limits.max) return this.store.retryAfterMs(nowMs, tx);
        await this.store.insert(nonce, client, nowMs, expiresAtMs, tx);
        return undefined;
      },
      { durable: true },
    );
    if (refusedFor !== undefined) return { ok: false, reason: "too_many_pending", retryAfterMs: refusedFor };
    return { ok: true, nonce, expiresAtMs };
  }

  /** Marks the nonce used; false if it was never issued, is used already, or has expired. */
  consume(nonce: string, nowMs = Date.now()): Promise<boolean> {
    return this.store.consume(nonce, nowMs);
  }

  /** Deletes nonces past their expiry (used or not): they can never sign anyone in. */
  purgeExpired(nowMs = Date.now()): Promise<number> {
    return this.store.purgeExpired(nowMs);
  }
}

/** What a message must say to be accepted here: where the gateway's dashboard is, and which chain. */
export interface SiweExpectations {
  /** The dashboard's origin, e.g. `https://gateway.example` or `http://127.0.0.1:8787`. */
  origin: URL;
  chainId: number;
}

export type SiweFailure =
  | "malformed_message"
  | "scheme_mismatch"
  | "domain_mismatch"
  | "uri_mismatch"
  | "chain_mismatch"
  | "issued_in_future"
  | "expired"
  | "not_yet_valid"
  | "bad_nonce"
  | "bad_signature";

export type VerifySiweParameters = {
  message: string;
  signature: string;
  expected: SiweExpectations;
  nonces: SiweNonces;
  /**
   * The chain the gateway is connected to. With it, ERC-1271 (deployed smart accounts) and
   * ERC-6492 (not yet deployed) signatures verify, as well as EOAs'; without it only EOAs'.
   */
  publicClient?: Pick<PublicClient, "verifyMessage">;
  nowMs?: number;
};

export type VerifySiweReturnType = { ok: true; address: Address; chainId: number } | { ok: false; reason: SiweFailure; message: string };

/** The chain could not be asked about a smart-account signature (a boundary failure, not a bad signature): chain_unavailable. */
export class SiweChainError extends GatewayError {
  override name = "SiweChainError";
  constructor(message: string, options: { cause?: unknown } = {}) {
    super("chain_unavailable", message, options);
  }
}

const fail = (reason: SiweFailure, message: string): VerifySiweReturnType => ({ ok: false, reason, message });

/**
 * Verifies a signed SIWE message, in this order: it parses; its scheme (when given), domain
 * and URI are the dashboard's; its chain id is the configured one; its `issuedAt` is not
 * ahead of the gateway's clock by more than SIWE_CLOCK_SKEW_MS; it is within its
 * `notBefore`/`expirationTime`; its nonce was issued here and is unused and unexpired (the
 * nonce is used up from this point on, whatever the signature); the signature is its
 * address's. Expected refusals are results; SiweChainError when the chain cannot answer.
 */
export async function verifySiwe(parameters: VerifySiweParameters): Promise<VerifySiweReturnType> {
  const { expected, nowMs = Date.now() } = parameters;
  let parsed: SiweMessage;
  try {
    parsed = new SiweMessage(parameters.message);
  } catch {
    return fail("malformed_message", "The message is not an EIP-4361 Sign-In With Ethereum message.");
  }

  const scheme = expected.origin.protocol.slice(0, -1);
  if (parsed.scheme !== undefined && parsed.scheme !== scheme) {
    return fail("scheme_mismatch", `The message's scheme must be ${scheme}.`);
  }
  if (parsed.domain !== expected.origin.host) {
    return fail("domain_mismatch", `The message's domain must be ${expected.origin.host}.`);
  }
  let uri: URL | undefined;
  try {
    uri = new URL(parsed.uri);
  } catch {
    uri = undefined;
  }
  if (!uri || uri.origin !== expected.origin.origin) {
    return fail("uri_mismatch", `The message's URI must be on ${expected.origin.origin}.`);
  }
  if (parsed.chainId !== expected.chainId) {
    return fail("chain_mismatch", `The message's chain id must be ${expected.chainId}.`);
  }
  // The grammar requires Issued At; checked here all the same, never skipped when absent.
  const issuedAtMs = parsed.issuedAt === undefined ? Number.NaN : Date.parse(parsed.issuedAt);
  if (Number.isNaN(issuedAtMs)) return fail("malformed_message", "The message's issued-at time is missing or not a date.");
  if (issuedAtMs > nowMs + SIWE_CLOCK_SKEW_MS) {
    return fail("issued_in_future", "The message's issued-at time is in the future: check the signing device's clock and sign a new one.");
  }
  if (parsed.expirationTime !== undefined) {
    const expiresAtMs = Date.parse(parsed.expirationTime);
    if (Number.isNaN(expiresAtMs)) return fail("malformed_message", "The message's expiration time is not a date.");
    if (expiresAtMs <= nowMs) return fail("expired", "The message has expired: sign a new one.");
  }
  if (parsed.notBefore !== undefined) {
    const validFromMs = Date.parse(parsed.notBefore);
    if (Number.isNaN(validFromMs)) return fail("malformed_message", "The message's not-before time is not a date.");
    if (validFromMs > nowMs) return fail("not_yet_valid", "The message is not valid yet (its notBefore is in the future).");
  }
  // Malformed signatures are refused before the nonce is spent, so a typo costs nothing.
  // 65 bytes is an EOA's signature; smart accounts' are longer, never shorter.
  if (!isHex(parameters.signature, { strict: true }) || parameters.signature.length < 2 + 130 || parameters.signature.length % 2 !== 0) {
    return fail("bad_signature", "The signature must be 0x-prefixed hex of at least 65 bytes.");
  }

  // From here on the nonce is spent whatever follows: one signed message, one attempt.
  if (!(await parameters.nonces.consume(parsed.nonce, nowMs))) {
    return fail("bad_nonce", "Unknown, used or expired nonce: get a new one from GET /auth/siwe/nonce.");
  }

  const address = getAddress(parsed.address);
  const signature = parameters.signature as Hex;
  let valid: boolean;
  if (parameters.publicClient) {
    try {
      valid = await parameters.publicClient.verifyMessage({ address, message: parameters.message, signature });
    } catch (error) {
      // viem answers false for a signature that does not verify, and also when the chain's
      // eth_call fails (it then falls back to ECDSA recovery, so EOAs still sign in): an
      // outage fails closed. What still throws is a failure outside the call itself.
      throw new SiweChainError("The chain could not be reached to verify this signature; get a new nonce and try again.", { cause: error });
    }
  } else {
    valid = await verifyMessage({ address, message: parameters.message, signature }).catch(() => false);
  }
  if (!valid) return fail("bad_signature", `The signature is not ${address}'s signature of this message.`);
  return { ok: true, address, chainId: parsed.chainId };
}
