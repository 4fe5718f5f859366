/**
 * The machinery every sponsored UserOperation of an embedded wallet goes through, whatever it does (a top-up
 * sweep, a seller's claim): sent at once when the gateway holds the owner key, or prepared here and sent later
 * with the owner's signature when a SIWE address owns the wallet. The gateway paymaster signs each one, and only
 * the gateway's own flows (server/wallets/aa-flows.ts).
 */
import { HttpRequestError, TimeoutError, getAddress, http, isHex, type Address, type Hex, type LocalAccount } from "viem";
import { createBundlerClient, getUserOperationHash, type UserOperation, type UserOperationReceipt } from "viem/account-abstraction";
import { getChainId } from "viem/actions";
import { SPONSORSHIP_TTL_SECONDS, gatewayPaymaster, type AaDeployment, type Call } from "./aa";
import { type EmbeddedWallet, type WalletChain, WalletError, addressOnlyOwner, smartAccountFor } from "./wallets";

/** What building and paying for an embedded wallet's operation needs. */
export interface SponsorParameters {
  chain: WalletChain & { bundlerUrl: string };
  aa: AaDeployment;
  usdc: Address;
  escrow: Address;
  /** The key the gateway paymaster trusts. Never logged. */
  paymasterSigner: LocalAccount;
}

/** Why the bundler did not take an operation: unreachable (try again) or refused (with its words). */
export type BundlerRefusal = { ok: false; reason: "rejected" | "bundler_unavailable"; message: string };

/** Classifies an error thrown by a bundler request. */
export function bundlerRefusal(error: unknown): BundlerRefusal {
  const unreachable =
    error instanceof Error &&
    "walk" in error &&
    (error as { walk: (fn: (e: unknown) => boolean) => unknown }).walk((e) => e instanceof HttpRequestError || e instanceof TimeoutError);
  const message = (error as { shortMessage?: string; message?: string }).shortMessage ?? String((error as Error).message ?? error);
  return { ok: false, reason: unreachable ? "bundler_unavailable" : "rejected", message };
}

const WAIT_POLLING_MS = 100;

/**
 * Sends `calls` from `wallet`, signed by its server-held `owner`, sponsored by the gateway paymaster, and waits
 * for the receipt. A bundler refusal is a result; a receipt that says the operation reverted is the caller's
 * to judge (returned as is).
 */
export async function sendAsServer(
  p: SponsorParameters,
  wallet: EmbeddedWallet,
  owner: LocalAccount,
  calls: Call[],
  options: { timeoutMs?: number } = {},
): Promise<{ ok: true; userOpHash: Hex; receipt: UserOperationReceipt } | BundlerRefusal> {
  const account = await smartAccountFor(p.chain, owner);
  if (getAddress(account.address) !== wallet.address) {
    throw new WalletError(`${wallet.accountId}'s owner computes ${account.address}, not the stored ${wallet.address}`);
  }
  const bundler = createBundlerClient({
    client: p.chain.client,
    account,
    transport: http(p.chain.bundlerUrl, { retryCount: 0 }),
    paymaster: gatewayPaymaster({ deployment: p.aa, usdc: p.usdc, escrow: p.escrow, signer: p.paymasterSigner }),
  });
  let userOpHash: Hex;
  try {
    userOpHash = await bundler.sendUserOperation({ calls });
  } catch (error) {
    return bundlerRefusal(error);
  }
  const receipt = await bundler.waitForUserOperationReceipt({
    hash: userOpHash,
    pollingInterval: WAIT_POLLING_MS,
    timeout: options.timeoutMs ?? 60_000,
  });
  return { ok: true, userOpHash, receipt };
}

/** An operation of a SIWE-owned wallet built by the server, waiting for its owner's signature of `userOpHash`. */
export interface PreparedOperation<Kind extends string = string, Details = unknown> {
  kind: Kind;
  userOpHash: Hex;
  accountId: string;
  wallet: Address;
  owner: Address;
  expiresAtMs: number;
  /** What the caller needs again on submission (the amount, the recipient, ...). */
  details: Details;
  /** The whole operation, paymaster data included, signature still the stub. Never taken from a client. */
  userOperation: UserOperation<"0.7">;
}

export type SubmitOperationResult<P extends PreparedOperation> =
  | { ok: true; prepared: P; userOpHash: Hex; receipt: UserOperationReceipt }
  | { ok: false; reason: "unknown" | "in_progress" | "bad_signature" }
  | BundlerRefusal;

/** Default lifetime of a prepared operation: well inside the paymaster's approval window. */
export const PREPARED_OPERATION_TTL_MS = 5 * 60_000;

/**
 * Owner-signed operations of SIWE wallets, in two steps. `prepare` builds the sponsored operation (deploying the
 * account if needed), keeps it here, and gives the hash its owner must sign (EIP-191 personal_sign of the
 * userOpHash, which SimpleAccount v0.7 checks); `submit` sends exactly that operation with the signature.
 * Kept in memory: a restart only means preparing again.
 */
export class OwnerSignedOperations {
  private readonly prepared = new Map<Hex, PreparedOperation & { submitting: boolean }>();

  constructor(
    private readonly p: SponsorParameters,
    /** How long a prepared operation stays submittable (never past its paymaster approval). */
    private readonly ttlMs = PREPARED_OPERATION_TTL_MS,
  ) {}

  private purgeExpired(now: number): void {
    for (const [hash, entry] of this.prepared) if (entry.expiresAtMs <= now && !entry.submitting) this.prepared.delete(hash);
  }

  /**
   * Builds and keeps the sponsored operation running `calls` from `wallet` (SIWE-owned). A newer preparation of
   * the same kind replaces the account's older ones. Bundler failures (gas estimation) are thrown.
   */
  async prepare<Kind extends string, Details>(
    wallet: EmbeddedWallet,
    kind: Kind,
    calls: Call[],
    details: Details,
  ): Promise<PreparedOperation<Kind, Details>> {
    if (wallet.ownerKind !== "siwe") throw new WalletError(`${wallet.accountId}'s wallet is server-owned: the gateway signs it itself`);
    const account = await smartAccountFor(this.p.chain, addressOnlyOwner(wallet.ownerAddress));
    if (getAddress(account.address) !== wallet.address) {
      throw new WalletError(`${wallet.accountId}'s owner computes ${account.address}, not the stored ${wallet.address}`);
    }
    const now = Date.now();
    const bundler = createBundlerClient({
      client: this.p.chain.client,
      account,
      transport: http(this.p.chain.bundlerUrl, { retryCount: 0 }),
      paymaster: gatewayPaymaster({
        deployment: this.p.aa,
        usdc: this.p.usdc,
        escrow: this.p.escrow,
        signer: this.p.paymasterSigner,
        now: () => now,
      }),
    });
    const built = await bundler.prepareUserOperation({ calls });
    const { account: _account, ...fields } = built as typeof built & { account?: unknown };
    const userOperation = fields as unknown as UserOperation<"0.7">;
    const chainId = await getChainId(this.p.chain.client);
    const userOpHash = getUserOperationHash({ userOperation, entryPointAddress: this.p.aa.entryPoint, entryPointVersion: "0.7", chainId });
    // The paymaster's approval runs out SPONSORSHIP_TTL_SECONDS after `now`: the preparation expires first.
    const ttl = Math.min(this.ttlMs, SPONSORSHIP_TTL_SECONDS * 1000 - 30_000);
    const entry: PreparedOperation<Kind, Details> = {
      kind,
      userOpHash,
      accountId: wallet.accountId,
      wallet: wallet.address,
      owner: wallet.ownerAddress,
      expiresAtMs: now + ttl,
      details,
      userOperation,
    };
    this.purgeExpired(now);
    for (const [hash, other] of this.prepared) {
      if (other.accountId === wallet.accountId && other.kind === kind && !other.submitting) this.prepared.delete(hash);
    }
    this.prepared.set(userOpHash, { ...entry, submitting: false });
    return entry;
  }

  /** The live preparation `userOpHash` of `accountId` and `kind`, if any (to read its details). */
  find<P extends PreparedOperation>(accountId: string, kind: P["kind"], userOpHash: Hex): P | undefined {
    const entry = this.prepared.get(userOpHash.toLowerCase() as Hex) ?? this.prepared.get(userOpHash);
    if (!entry || entry.accountId !== accountId || entry.kind !== kind || entry.expiresAtMs <= Date.now()) return undefined;
    const { submitting: _submitting, ...prepared } = entry;
    return prepared as P;
  }

  /**
   * Sends the prepared operation `userOpHash` of `accountId` and `kind` with its owner's `signature` and waits
   * for it to be mined. Unknown, expired, another account's or another kind's hash: "unknown". A signature the
   * bundler refuses leaves the preparation usable until it expires; once the bundler took it, it is spent.
   */
  async submit<P extends PreparedOperation>(
    accountId: string,
    kind: P["kind"],
    userOpHash: Hex,
    signature: Hex,
    options: { timeoutMs?: number } = {},
  ): Promise<SubmitOperationResult<P>> {
    this.purgeExpired(Date.now());
    const entry = this.prepared.get(userOpHash.toLowerCase() as Hex) ?? this.prepared.get(userOpHash);
    if (!entry || entry.accountId !== accountId || entry.kind !== kind || entry.expiresAtMs <= Date.now())
      return { ok: false, reason: "unknown" };
    if (entry.submitting) return { ok: false, reason: "in_progress" };
    if (!isHex(signature, { strict: true }) || signature.length !== 2 + 2 * 65) return { ok: false, reason: "bad_signature" };
    entry.submitting = true;
    const bundler = createBundlerClient({ client: this.p.chain.client, transport: http(this.p.chain.bundlerUrl, { retryCount: 0 }) });
    let sent: Hex;
    try {
      sent = await bundler.sendUserOperation({ ...entry.userOperation, signature, entryPointAddress: this.p.aa.entryPoint });
    } catch (error) {
      entry.submitting = false;
      return bundlerRefusal(error);
    }
    this.prepared.delete(entry.userOpHash);
    const receipt = await bundler.waitForUserOperationReceipt({
      hash: sent,
      pollingInterval: WAIT_POLLING_MS,
      timeout: options.timeoutMs ?? 60_000,
    });
    const { submitting: _submitting, ...prepared } = entry;
    return { ok: true, prepared: prepared as P, userOpHash: sent, receipt };
  }
}
