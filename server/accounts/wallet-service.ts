import type { Address, LocalAccount } from "viem";
import { readContract } from "viem/actions";
import type { AaDeployment } from "../chain/aa";
import type { Ledger } from "../ledger/ledger";
import type { Sessions } from "./sessions";
import { type EmbeddedWallet, type WalletChain, ensureEmbeddedWallet, getEmbeddedWallet, listEmbeddedWallets, sweepWalletToEscrow } from "./wallets";

const USDC_BALANCE_ABI = [
  { type: "function", name: "balanceOf", stateMutability: "view", inputs: [{ name: "account", type: "address" }], outputs: [{ type: "uint256" }] },
] as const;

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
}

/**
 * Embedded wallets, seen from the identity path: every account that signs in gets one (owned
 * by its SIWE address if it has one, else by a key the server holds encrypted), and USDC that
 * arrives in a server-owned wallet is swept into the escrow by a sponsored UserOperation,
 * where the deposit indexer credits it. A SIWE wallet moves only with its owner's signature,
 * so it is not swept here: its owner deposits directly.
 */
export class WalletService {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<unknown> | undefined;

  constructor(private readonly p: WalletServiceParameters) {}

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
    const existing = getEmbeddedWallet(this.p.ledger.db, accountId);
    if (existing) return existing;
    const siwe = this.p.sessions.identitiesOf(accountId).find((i) => i.provider === "siwe");
    const owner = siwe ? { kind: "siwe" as const, address: siwe.subject } : { kind: "server" as const };
    const created = await ensureEmbeddedWallet(this.p.ledger, accountId, owner, { chain: this.p.chain, encryptionKey: this.p.encryptionKey });
    if (!created.link.ok) this.p.log(`embedded wallet ${created.address} of ${accountId} not linked for deposits: ${created.link.reason}`);
    return created;
  }

  /** Moves the USDC in every server-owned wallet (at least the minimum) into the escrow; returns how many moved. */
  async sweepAll(): Promise<number> {
    let swept = 0;
    for (const wallet of listEmbeddedWallets(this.p.ledger.db)) {
      if (wallet.ownerKind !== "server") continue;
      const balance = await readContract(this.p.chain.client, { address: this.p.usdc, abi: USDC_BALANCE_ABI, functionName: "balanceOf", args: [wallet.address] });
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

