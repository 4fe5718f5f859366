import { erc20Abi, type Address, type Hex, type LocalAccount } from "viem";
import type { UserOperation } from "viem/account-abstraction";
import { readContract } from "viem/actions";
import type { AaDeployment } from "./aa";
import { escrowDepositCalls } from "./aa-flows";
import type { Ledger } from "../ledger/ledger";
import type { Sessions } from "../identity/sessions";
import { type Refusal, refusal } from "../errors";
import { usdDisplay } from "../ledger/money";
import {
  OwnerSignedOperations,
  PREPARED_OPERATION_TTL_MS,
  type PreparedOperation,
  type SubmitOperationResult,
} from "./sponsored-operations";
import type { VoucherIssuer } from "../settlement/vouchers";
import { WalletClaims } from "./wallet-claims";
import { WalletWithdrawals } from "./wallet-withdrawals";
import { walletFor } from "./wallet-operations";
import { type EmbeddedWallet, type WalletChain, ensureEmbeddedWallet, getEmbeddedWallet, listEmbeddedWallets } from "./wallets";
import { sweepWalletToEscrow } from "./sweep";
import { WalletError } from "./wallet-error";

export interface WalletServiceParameters {
  ledger: Ledger;
  sessions: Sessions;
  chain: WalletChain & { bundlerUrl: string };
  aa: AaDeployment;
  usdc: Address;
  escrow: Address;
  /** The key the gateway paymaster trusts. Never logged. */
  paymasterSigner: LocalAccount;
  /** WALLET_ENCRYPTION_KEY, for wallets whose owner key the server holds. */
  encryptionKey: string;
  /** The escrow's minimum deposit: less is left in the wallet until more arrives. */
  minimumMicros: bigint;
  log: (message: string, error?: unknown) => void;
  /** The money path's voucher issuer: without it there are no withdrawals to an address. */
  vouchers?: VoucherIssuer | undefined;
  /** How long a prepared owner-signed operation (sweep, claim, withdrawal) stays submittable (never past its paymaster approval). */
  preparedSweepTtlMs?: number;
}

/** A SIWE wallet's sweep built by the server, waiting for its owner's signature of `userOpHash`. */
export interface PreparedSweep {
  userOpHash: Hex;
  accountId: string;
  wallet: Address;
  owner: Address;
  amountMicros: bigint;
  expiresAtMs: number;
  /** The whole operation, paymaster data included, signature still the stub. Never taken from a client. */
  userOperation: UserOperation<"0.7">;
}

/**
 * A prepared sweep, or why not: no_wallet, wallet_swept_automatically (the gateway holds the key and sweeps
 * the wallet itself), amount_below_minimum (empty, or under the escrow's minimum deposit).
 */
export type PrepareSweepResult =
  { ok: true; prepared: PreparedSweep } | Refusal<"no_wallet" | "wallet_swept_automatically" | "amount_below_minimum">;

export type SubmitSweepResult =
  | { ok: true; amountMicros: bigint; userOpHash: Hex; transactionHash: Hex }
  | Exclude<SubmitOperationResult<PreparedSweepOperation>, { ok: true }>;

/** Default lifetime of a prepared sweep: well inside the paymaster's approval window. */
export const PREPARED_SWEEP_TTL_MS = PREPARED_OPERATION_TTL_MS;

type PreparedSweepOperation = PreparedOperation<"sweep", { amountMicros: bigint }>;

function toPreparedSweep(entry: PreparedSweepOperation): PreparedSweep {
  const { userOpHash, accountId, wallet, owner, expiresAtMs, userOperation } = entry;
  return { userOpHash, accountId, wallet, owner, amountMicros: entry.details.amountMicros, expiresAtMs, userOperation };
}

/**
 * Embedded wallets, seen from the identity path: every account that signs in gets one (owned
 * by its SIWE address if it has one, else by a key the server holds encrypted), and USDC that
 * arrives in a server-owned wallet is swept into the escrow by a sponsored UserOperation,
 * where the deposit indexer credits it. A SIWE wallet moves only with its owner's signature,
 * so it is not swept here: its owner signs a sweep the gateway prepares (prepareOwnerSweep, then
 * submitOwnerSweep with the signature), or deposits directly. A seller's claim from its wallet is `claims`
 * (./wallet-claims.ts); a withdrawal to an address through the wallet is `withdrawals` (./wallet-withdrawals.ts).
 */
export class WalletService {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<unknown> | undefined;

  /** Operations prepared for SIWE owners to sign: sweeps here, claims in `claims`. */
  private readonly ownerSigned: OwnerSignedOperations;
  /** A seller's claim of its earnings from its embedded wallet. */
  readonly claims: WalletClaims;
  /** Withdrawals to an address from the embedded wallet (./wallet-withdrawals.ts); only with a voucher issuer. */
  readonly withdrawals: WalletWithdrawals | undefined;

  constructor(private readonly p: WalletServiceParameters) {
    this.ownerSigned = new OwnerSignedOperations(p, p.preparedSweepTtlMs);
    this.claims = new WalletClaims(p, this.ownerSigned);
    this.withdrawals = p.vouchers ? new WalletWithdrawals({ ...p, vouchers: p.vouchers }, this.ownerSigned) : undefined;
  }

  /**
   * Builds, for an account whose wallet its SIWE address owns, the sponsored UserOperation that moves the
   * wallet's whole USDC balance into the escrow (approve + depositFor, deploying the account if needed), keeps
   * it for `preparedSweepTtlMs`, and returns it with the hash its owner must sign (EIP-191 personal_sign of the
   * userOpHash, which SimpleAccount v0.7 checks). A newer preparation replaces the account's older ones.
   */
  async prepareOwnerSweep(accountId: string): Promise<PrepareSweepResult> {
    const found = await walletFor(this.p.ledger.db, accountId, "sweep", "siwe");
    if (!found.ok) return found;
    const { wallet } = found;
    const balanceMicros = await readContract(this.p.chain.client, {
      address: this.p.usdc,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [wallet.address],
    });
    if (balanceMicros === 0n) return refusal("amount_below_minimum", "The wallet holds no USDC.");
    if (balanceMicros < this.p.minimumMicros) {
      return refusal("amount_below_minimum", `The wallet holds ${usdDisplay(balanceMicros)} in USDC, less than the minimum deposit.`);
    }
    const calls = escrowDepositCalls({ usdc: this.p.usdc, escrow: this.p.escrow, wallet: wallet.address, amountMicros: balanceMicros });
    const entry: PreparedSweepOperation = await this.ownerSigned.prepare(wallet, "sweep", calls, { amountMicros: balanceMicros });
    return { ok: true, prepared: toPreparedSweep(entry) };
  }

  /**
   * Sends the prepared sweep `userOpHash` of `accountId` with its owner's `signature` and waits for it to be
   * mined. Unknown, expired or another account's hash: "unknown". A signature the bundler refuses leaves the
   * preparation usable until it expires. The ledger is credited by the deposit indexer, not here.
   */
  async submitOwnerSweep(
    accountId: string,
    userOpHash: Hex,
    signature: Hex,
    options: { timeoutMs?: number } = {},
  ): Promise<SubmitSweepResult> {
    const result = await this.ownerSigned.submit<PreparedSweepOperation>(accountId, "sweep", userOpHash, signature, options);
    if (!result.ok) return result;
    if (!result.receipt.success) {
      throw new WalletError(
        `the sweep of ${result.prepared.wallet} reverted on chain (UserOperation ${result.userOpHash}): ${result.receipt.reason ?? "no reason"}`,
      );
    }
    return {
      ok: true,
      amountMicros: result.prepared.details.amountMicros,
      userOpHash: result.userOpHash,
      transactionHash: result.receipt.receipt.transactionHash,
    };
  }

  /** Sweeps every `intervalMs` (one sweep at a time) until stop(). */
  start(intervalMs: number): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.sweeping) return;
      this.sweeping = this.sweepAll()
        .catch((error) => this.p.log("[wallets] sweep failed; will retry", error))
        .finally(() => (this.sweeping = undefined));
    }, intervalMs);
  }

  /** Stops the loop and waits for a sweep in progress. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  /** The account's embedded wallet, created on first sign-in. */
  async ensureFor(accountId: string): Promise<EmbeddedWallet> {
    const existing = await getEmbeddedWallet(this.p.ledger.db, accountId);
    if (existing) return existing;
    const siwe = (await this.p.sessions.identitiesOf(accountId)).find((i) => i.provider === "siwe");
    const owner = siwe ? { kind: "siwe" as const, address: siwe.subject } : { kind: "server" as const };
    const created = await ensureEmbeddedWallet(this.p.ledger, accountId, owner, {
      chain: this.p.chain,
      encryptionKey: this.p.encryptionKey,
    });
    if (!created.link.ok) this.p.log(`embedded wallet ${created.address} of ${accountId} not linked for deposits: ${created.link.reason}`);
    return created;
  }

  /** Moves the USDC in every server-owned wallet (at least the minimum) into the escrow; returns how many moved. */
  async sweepAll(): Promise<number> {
    let swept = 0;
    for (const wallet of await listEmbeddedWallets(this.p.ledger.db)) {
      if (wallet.ownerKind !== "server") continue;
      const balance = await readContract(this.p.chain.client, {
        address: this.p.usdc,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [wallet.address],
      });
      if (balance === 0n || balance < this.p.minimumMicros) continue;
      try {
        const result = await sweepWalletToEscrow({
          ledger: this.p.ledger,
          accountId: wallet.accountId,
          chain: this.p.chain,
          aa: this.p.aa,
          usdc: this.p.usdc,
          escrow: this.p.escrow,
          paymasterSigner: this.p.paymasterSigner,
          encryptionKey: this.p.encryptionKey,
          minimumMicros: this.p.minimumMicros,
        });
        if (result.swept) swept++;
      } catch (error) {
        this.p.log(`sweeping ${wallet.address} into the escrow failed; will retry`, error);
      }
    }
    return swept;
  }
}

/**
 * The wallets module: the embedded wallets' service when the gateway has the ERC-4337 stack (`parameters`), else
 * nothing. Every account that opens a session gets its wallet then; a failure waits for its next sign-in.
 */
export function createWallets(
  parameters: Omit<WalletServiceParameters, "ledger" | "sessions" | "log" | "vouchers"> | undefined,
  parts: Pick<WalletServiceParameters, "ledger" | "sessions" | "log" | "vouchers">,
): WalletService | undefined {
  if (!parameters) return undefined;
  const wallets = new WalletService({ ...parameters, ...parts });
  parts.sessions.onOpen = async (accountId) => {
    try {
      await wallets.ensureFor(accountId);
    } catch (error) {
      parts.log(`could not give ${accountId} its embedded wallet; it gets one at its next sign-in`, error);
    }
  };
  return wallets;
}
