import { type Address, type Hex, createWalletClient, custom, keccak256, toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { loadConfig } from "../../server/config";
import { linkAddress } from "../../server/settlement/addresses";
import type { Ledger } from "../../server/ledger/ledger";
import { type VoucherIssuerParameters, type VoucherLimits, VoucherIssuer } from "../../server/settlement/vouchers";

/** The bounds a gateway gives its vouchers when nothing is configured (server/config.ts). */
export const DEFAULT_VOUCHER_LIMITS: VoucherLimits = (() => {
  const config = loadConfig({});
  return {
    minimumMicros: config.voucherMinMicros,
    openPerAccountMax: config.vouchersOpenPerAccountMax,
    issuedPerHourMax: config.voucherRateLimitPerHour,
  };
})();

/** An escrow address for tests without a chain. */
export const ESCROW: Address = "0x00000000000000000000000000000000000e5c40";

/**
 * A voucher signer that needs no chain: a local key signs the EIP-712 voucher in the process, and any request it
 * would send to a node is refused.
 */
export function offlineSigner() {
  return createWalletClient({
    account: privateKeyToAccount(`0x${"5a".repeat(32)}`),
    transport: custom({
      request: async ({ method }: { method: string }) => {
        throw new Error(`the offline signer sends nothing (${method})`);
      },
    }),
  });
}

/** An issuer on `ledger` that signs offline, with the default bounds unless told otherwise. */
export function offlineIssuer(ledger: Ledger, overrides: Partial<VoucherIssuerParameters> = {}): VoucherIssuer {
  return new VoucherIssuer({
    ledger,
    signer: offlineSigner(),
    escrowAddress: ESCROW,
    chainId: 8453,
    ttlSec: 600,
    limits: DEFAULT_VOUCHER_LIMITS,
    ...overrides,
  });
}

/** A user account `id` with `micros` available and one escrow address; returns the address. */
export async function voucherHolder(ledger: Ledger, id: string, micros: bigint, address: Address): Promise<Address> {
  await ledger.ensureAccount({ id, kind: "user", name: id });
  const linked = await linkAddress(ledger, { accountId: id, address });
  if (!linked.ok) throw new Error(`could not link ${address} to ${id}`);
  if (micros > 0n) await ledger.credit(id, micros, "deposit", "test deposit");
  return address;
}

/** A redemption the stub chain reports: the escrow's VoucherRedeemed in `blockNumber`. */
export interface StubRedemption {
  blockNumber: bigint;
  account: Address;
  nonce: bigint;
  amount: bigint;
}

/** What the stub chain holds; a test changes it between sweeps. */
export interface StubChainState {
  head: bigint;
  /** Each block's time (default: 1,000,000 s plus 2 s a block). */
  timeOf: (block: bigint) => bigint;
  /** Each block's hash (default: a hash of its number). */
  hashOf: (block: bigint) => Hex;
  redemptions: StubRedemption[];
  /** How long each call takes, so that overlapping runs would show. */
  delayMs: number;
}

/** One RPC call the stub answered. */
export type StubCall = { method: string; fromBlock?: bigint; toBlock?: bigint };

/**
 * A chain client for the sweep with no chain behind it: it answers from `state`, records each call, and counts the
 * calls in flight at once. It answers the per-voucher read (`voucherNonceUsed` through readContract) and the
 * latest block too, so that a sweep that reads each voucher can be measured with it.
 */
export function stubSweepClient(initial: Partial<StubChainState> = {}) {
  const state: StubChainState = {
    head: 100n,
    timeOf: (block) => 1_000_000n + 2n * block,
    hashOf: (block) => keccak256(toHex(`block ${block}`)),
    redemptions: [],
    delayMs: 0,
    ...initial,
  };
  const calls: StubCall[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const answer = async <T>(call: StubCall, value: () => T): Promise<T> => {
    calls.push(call);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      await new Promise((resolve) => setTimeout(resolve, state.delayMs));
      return value();
    } finally {
      inFlight--;
    }
  };
  const client = {
    getBlockNumber: () => answer({ method: "getBlockNumber" }, () => state.head),
    getBlock: (parameters: { blockNumber?: bigint; blockTag?: string }) =>
      answer({ method: "getBlock" }, () => {
        const number = parameters.blockNumber ?? state.head;
        if (number > state.head) throw new Error(`block ${number} is above the head ${state.head}`);
        return { number, hash: state.hashOf(number), timestamp: state.timeOf(number) };
      }),
    getLogs: (parameters: { fromBlock: bigint; toBlock: bigint }) =>
      answer({ method: "getLogs", fromBlock: parameters.fromBlock, toBlock: parameters.toBlock }, () =>
        state.redemptions
          .filter((r) => r.blockNumber >= parameters.fromBlock && r.blockNumber <= parameters.toBlock && r.blockNumber <= state.head)
          .map((r, logIndex) => ({
            eventName: "VoucherRedeemed",
            removed: false,
            blockNumber: r.blockNumber,
            blockHash: state.hashOf(r.blockNumber),
            transactionHash: keccak256(toHex(`redeem ${r.account} ${r.nonce}`)),
            logIndex,
            args: { account: r.account, nonce: r.nonce, amount: r.amount, balance: 0n },
          })),
      ),
    readContract: (parameters: { functionName: string; args: readonly [Address, bigint] }) =>
      answer({ method: "readContract" }, () => {
        const [account, nonce] = parameters.args;
        return state.redemptions.some(
          (r) => r.account.toLowerCase() === account.toLowerCase() && r.nonce === nonce && r.blockNumber <= state.head,
        );
      }),
  };
  return {
    state,
    calls,
    /** The client, typed as the sweep asks for it. */
    client: client as unknown as Parameters<VoucherIssuer["sweep"]>[0],
    get maxInFlight() {
      return maxInFlight;
    },
    /** The calls of one method, or all. */
    count: (method?: string) => calls.filter((c) => method === undefined || c.method === method).length,
    reset() {
      calls.length = 0;
      maxInFlight = 0;
    },
  };
}
