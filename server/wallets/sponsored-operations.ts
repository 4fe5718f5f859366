/**
 * The machinery every sponsored UserOperation of an embedded wallet goes through, whatever it does (a top-up
 * sweep, a seller's claim): sent at once when the gateway holds the owner key, or prepared here and sent later
 * with the owner's signature when a SIWE address owns the wallet. The gateway paymaster signs each one, and only
 * the gateway's own flows (server/wallets/aa-flows.ts).
 */
import { HttpRequestError, TimeoutError, getAddress, http, isHex, type Address, type Hex, type LocalAccount } from "viem";
import { createBundlerClient, getUserOperationHash, type UserOperation, type UserOperationReceipt } from "viem/account-abstraction";
import { getChainId } from "viem/actions";
import { SPONSORSHIP_TTL_SECONDS, gatewayPaymaster, type AaDeployment } from "./aa";
import type { Call } from "./aa-flows";
import { type Refusal, refusal } from "../errors";
import { WalletError } from "./wallet-error";
import { type InProgressCode, WALLET_OPERATIONS, type WalletOperation } from "./wallet-operations";
import { type EmbeddedWallet, type WalletChain, addressOnlyOwner, smartAccountFor } from "./wallets";

/** What building and paying for an embedded wallet's operation needs. */
export interface SponsorParameters {
  chain: WalletChain & { bundlerUrl: string };
  aa: AaDeployment;
  usdc: Address;
  escrow: Address;
  /** The key the gateway paymaster trusts. Never logged. */
  paymasterSigner: LocalAccount;
}

/**
 * Why the bundler did not take an operation: it did not answer (chain_unavailable: try again), or
 * it refused an operation its owner signed (user_operation_rejected, with the bundler's words).
 * The error it threw is the cause: logged, never shown.
 */
export type BundlerRefusal = Refusal<"chain_unavailable" | "user_operation_rejected">;

/**
 * Classifies an error thrown by a bundler request about `what` ("claim", "withdrawal", ...) of an
 * owner-signed operation; `hint` is added to a rejection's message.
 */
export function bundlerRefusal(error: unknown, what: string, hint = ""): BundlerRefusal {
  const unreachable =
    error instanceof Error &&
    "walk" in error &&
    (error as { walk: (fn: (e: unknown) => boolean) => unknown }).walk((e) => e instanceof HttpRequestError || e instanceof TimeoutError);
  if (unreachable)
    return refusal("chain_unavailable", `The bundler is unreachable; the ${what} was not sent: try again.`, { cause: error });
  const words = (error as { shortMessage?: string; message?: string }).shortMessage ?? String((error as Error).message ?? error);
  return refusal("user_operation_rejected", `The bundler refused the ${what}${hint}: ${words}`, { cause: error });
}

/**
 * A bundler's refusal of an operation the gateway built and signed itself: the gateway's problem
 * (chain_unavailable), not the caller's, whatever the bundler said; its words stay in the cause.
 */
export function gatewaySendFailure(what: string, cause: unknown): Refusal<"chain_unavailable"> {
  return refusal("chain_unavailable", `The ${what} could not be sent to the chain; try again.`, { cause });
}

const WAIT_POLLING_MS = 100;

/**
 * Sends `calls` from `wallet`, signed by its server-held `owner`, sponsored by the gateway paymaster, and waits
 * for the receipt. A bundler refusal is a result (chain_unavailable: the gateway signed it, so it is never the
 * caller's fault); a receipt that says the operation reverted is the caller's to judge (returned as is).
 */
export async function sendAsServer(
  p: SponsorParameters,
  wallet: EmbeddedWallet,
  owner: LocalAccount,
  calls: Call[],
  options: { timeoutMs?: number; what: string },
): Promise<{ ok: true; userOpHash: Hex; receipt: UserOperationReceipt } | Refusal<"chain_unavailable">> {
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
    return gatewaySendFailure(options.what, error);
  }
  const receipt = await bundler.waitForUserOperationReceipt({
    hash: userOpHash,
    pollingInterval: WAIT_POLLING_MS,
    timeout: options.timeoutMs ?? 60_000,
  });
  return { ok: true, userOpHash, receipt };
}

/** An operation of a SIWE-owned wallet built by the server, waiting for its owner's signature of `userOpHash`. */
export interface PreparedOperation<Kind extends WalletOperation = WalletOperation, Details = unknown> {
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

/**
 * A submission: mined, or refused: not_found (unknown, expired, another account's or another kind's hash),
 * the kind's in-progress code, invalid_request (a signature that is not 65 bytes), or the bundler's refusal.
 */
export type SubmitOperationResult<P extends PreparedOperation> =
  | { ok: true; prepared: P; userOpHash: Hex; receipt: UserOperationReceipt }
  | Refusal<"not_found" | "invalid_request" | InProgressCode>
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
  async prepare<Kind extends WalletOperation, Details>(
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
   * for it to be mined. Unknown, expired, another account's or another kind's hash: not_found. A signature the
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
      return refusal("not_found", `No prepared ${kind} with this hash on this account (it may have expired): prepare again.`);
    if (entry.submitting) return refusal(WALLET_OPERATIONS[kind].inProgress, `This ${kind} is being submitted.`);
    if (!isHex(signature, { strict: true }) || signature.length !== 2 + 2 * 65)
      return refusal("invalid_request", "signature must be a 65-byte hex signature.");
    entry.submitting = true;
    const bundler = createBundlerClient({ client: this.p.chain.client, transport: http(this.p.chain.bundlerUrl, { retryCount: 0 }) });
    let sent: Hex;
    try {
      sent = await bundler.sendUserOperation({ ...entry.userOperation, signature, entryPointAddress: this.p.aa.entryPoint });
    } catch (error) {
      entry.submitting = false;
      return bundlerRefusal(error, kind, " (is the signature the owner's personal_sign of user_op_hash?)");
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
