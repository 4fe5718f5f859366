import type { Account, Address, Chain, PublicClient, Transport, WalletClient } from "viem";
import type { Config } from "../config";
import type { Ledger } from "../ledger/ledger";
import { DepositIndexer } from "./indexer";
import { Settler } from "./settler";
import { type SettlementStores, settlementStores } from "./store";
import { VoucherIssuer } from "./vouchers";

/** The chain the gateway's money lives on, and the keys it acts with there. */
export interface ChainConnection {
  publicClient: PublicClient;
  escrowAddress: Address;
  chainId: number;
  /** The escrow's deploy block: where the indexer starts on a fresh ledger. */
  deployBlock: bigint;
  /** Holds VOUCHER_SIGNER_ROLE; without it the gateway issues no vouchers. */
  voucherSigner?: WalletClient<Transport, Chain | undefined, Account>;
  /** Holds SETTLER_ROLE; without it the gateway posts no batches. */
  settlerWallet?: WalletClient<Transport, Chain | undefined, Account>;
  /**
   * Holds SETTLER_ROLE too, and moves this replica's x402 payments (the escrow's collectX402, then completeX402 or
   * refundX402), two transactions per paid call; without it the x402 endpoint is off. A key of its own, one per replica, so that its nonces never
   * race the batch settler's or another replica's.
   */
  x402Wallet?: WalletClient<Transport, Chain | undefined, Account>;
  voucherTtlSec?: number;
  /**
   * Funds card top-ups (server/payments/card-topups.ts): it mints test USDC to itself and deposits it for the
   * account, so on the local chain it is the TestUSDC owner (the deployer). Without it card top-ups are off.
   */
  fundingWallet?: WalletClient<Transport, Chain | undefined, Account>;
}

/** How often the vouchers are swept: expired ones come back this long after the chain passes their deadline, at most. */
const VOUCHER_SWEEP_INTERVAL_MS = 30_000;

/** The settings the money path reads: settlement's batches and pace, deposits' depth, vouchers' limits. */
export type MoneyPathConfig = Pick<
  Config,
  | "settleMaxCalls"
  | "settleTriggerCalls"
  | "settleIntervalMs"
  | "indexerIntervalMs"
  | "depositConfirmations"
  | "voucherMinMicros"
  | "vouchersOpenPerAccountMax"
  | "voucherRateLimitPerHour"
>;

export interface MoneyPath {
  indexer: DepositIndexer;
  settler?: Settler;
  vouchers?: VoucherIssuer;
  /** Starts the loops: indexing deposits, settling batches, sweeping vouchers. */
  start(): void;
  stop(): Promise<void>;
}

/**
 * The money path's moving parts for one gateway: the deposit indexer (chain → ledger), the
 * settler (ledger → chain), and the voucher issuer (withdrawals). Built with the gateway;
 * its loops run only once started, so a test can drive each step itself.
 */
export function createMoneyPath(
  ledger: Ledger,
  stores: SettlementStores,
  config: MoneyPathConfig,
  chain: ChainConnection,
  log: (message: string, error?: unknown) => void,
): MoneyPath {
  const settler = chain.settlerWallet
    ? new Settler({
        ledger,
        stores,
        publicClient: chain.publicClient,
        walletClient: chain.settlerWallet,
        escrowAddress: chain.escrowAddress,
        maxCallsPerBatch: config.settleMaxCalls,
        triggerCalls: config.settleTriggerCalls,
        deployBlock: chain.deployBlock,
        log: (message: string, error?: unknown) => log(`[settler] ${message}`, error),
      })
    : undefined;
  const indexer = new DepositIndexer({
    ledger,
    stores,
    publicClient: chain.publicClient,
    escrowAddress: chain.escrowAddress,
    deployBlock: chain.deployBlock,
    confirmations: config.depositConfirmations,
    // An exit pays out after its delay whatever was not settled by then: the account's paid
    // calls must reach the chain first, so a request wakes the settler at once.
    onExitRequested: () => settler?.nudge(),
    log: (message: string, error?: unknown) => log(`[chain] ${message}`, error),
  });
  const vouchers = chain.voucherSigner
    ? new VoucherIssuer({
        ledger,
        stores,
        signer: chain.voucherSigner,
        escrowAddress: chain.escrowAddress,
        chainId: chain.chainId,
        ttlSec: chain.voucherTtlSec,
        limits: {
          minimumMicros: config.voucherMinMicros,
          openPerAccountMax: config.vouchersOpenPerAccountMax,
          issuedPerHourMax: config.voucherRateLimitPerHour,
        },
        deployBlock: chain.deployBlock,
        // A redemption is read at the deposits' depth: a voucher is given back only once a block that deep is past its deadline.
        confirmations: config.depositConfirmations,
        log: (message: string, error?: unknown) => log(`[vouchers] ${message}`, error),
      })
    : undefined;

  return {
    indexer,
    settler,
    vouchers,
    start() {
      indexer.start(config.indexerIntervalMs);
      settler?.start(config.settleIntervalMs);
      // One sweep at a time: the next starts an interval after the last one ended, however long it took.
      vouchers?.sweeper.start(chain.publicClient, VOUCHER_SWEEP_INTERVAL_MS);
    },
    async stop() {
      await vouchers?.sweeper.stop();
      await indexer.stop();
      await settler?.stop();
    },
  };
}

/** Settlement for one gateway: its tables, and with a chain the money path's moving parts (not started). */
export interface Settlement {
  /** Linked addresses, vouchers, and the reads behind earnings. */
  stores: SettlementStores;
  /** The escrow chain; without it calls are billed against the ledger only. */
  chain?: ChainConnection;
  moneyPath?: MoneyPath;
}

/** The settlement module: its stores on the ledger's database, and the money path when there is a chain. */
export function createSettlement(
  ledger: Ledger,
  config: MoneyPathConfig,
  chain: ChainConnection | undefined,
  log: (message: string, error?: unknown) => void,
): Settlement {
  const stores = settlementStores(ledger.db);
  return { stores, chain, moneyPath: chain ? createMoneyPath(ledger, stores, config, chain, log) : undefined };
}
