/**
 * Top-up by crypto transfer: USDC sent to an account's embedded wallet is moved into the escrow by one
 * UserOperation, `approve(escrow, amount)` + `depositFor(wallet, amount)`, whose gas the gateway paymaster
 * sponsors; the deposit indexer then credits the ledger like any deposit, once.
 */
import { erc20Abi, getAddress, http, type Address, type Hex, type LocalAccount } from "viem";
import { createBundlerClient } from "viem/account-abstraction";
import { gatewayPaymaster, type AaDeployment } from "./aa";
import { escrowDepositCalls } from "./aa-flows";
import type { Ledger } from "../ledger/ledger";
import { WalletError } from "./wallet-error";
import { type WalletChain, getEmbeddedWallet, serverOwnerOf, smartAccountFor, withWalletLock } from "./wallets";

export type SweepWalletParameters = {
  ledger: Ledger;
  accountId: string;
  chain: WalletChain & { bundlerUrl: string };
  aa: AaDeployment;
  usdc: Address;
  escrow: Address;
  /** The key the paymaster trusts. Never logged. */
  paymasterSigner: LocalAccount;
  /** For a server-owned wallet. */
  encryptionKey?: string;
  /** For a SIWE wallet: the owner's signer (its address must be the owner's). */
  ownerSigner?: LocalAccount;
  /** Sweep nothing below this (the escrow's minimum deposit; a smaller depositFor would revert). */
  minimumMicros?: bigint;
  /** How long to wait for the UserOperation to be mined. */
  timeoutMs?: number;
};

export type SweepWalletReturnType =
  | { swept: false; reason: "empty" | "below_minimum"; balanceMicros: bigint }
  | { swept: true; amountMicros: bigint; userOpHash: Hex; transactionHash: Hex };

/**
 * Moves all the USDC in the account's embedded wallet into the escrow, credited to the wallet, by ONE
 * UserOperation (`approve` + `depositFor`, deploying the account first if needed) sponsored by the gateway
 * paymaster. The ledger is credited by the deposit indexer from the escrow's `Deposited` event, not here, so
 * it happens once whatever retries. One operation per wallet at a time in this process (withWalletLock).
 */
export async function sweepWalletToEscrow(parameters: SweepWalletParameters): Promise<SweepWalletReturnType> {
  const { ledger, accountId, chain, aa, usdc, escrow } = parameters;
  const wallet = await getEmbeddedWallet(ledger.db, accountId);
  if (!wallet) throw new WalletError(`${accountId} has no embedded wallet`);
  const locked = await withWalletLock(wallet.address, async (): Promise<SweepWalletReturnType> => {
    let owner: LocalAccount;
    if (wallet.ownerKind === "server") owner = await serverOwnerOf(ledger.db, accountId, parameters.encryptionKey);
    else {
      if (!parameters.ownerSigner) throw new WalletError(`${accountId}'s wallet is owned by ${wallet.ownerAddress}: pass its signer`);
      if (getAddress(parameters.ownerSigner.address) !== wallet.ownerAddress) {
        throw new WalletError(`the signer given is not ${accountId}'s wallet owner ${wallet.ownerAddress}`);
      }
      owner = parameters.ownerSigner;
    }
    const { readContract } = await import("viem/actions");
    const balanceMicros = await readContract(chain.client, {
      address: usdc,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [wallet.address],
    });
    if (balanceMicros === 0n) return { swept: false, reason: "empty", balanceMicros };
    if (balanceMicros < (parameters.minimumMicros ?? 0n)) return { swept: false, reason: "below_minimum", balanceMicros };

    const account = await smartAccountFor(chain, owner);
    if (getAddress(account.address) !== wallet.address) {
      throw new WalletError(`${accountId}'s owner computes ${account.address}, not the stored ${wallet.address}`);
    }
    const bundler = createBundlerClient({
      client: chain.client,
      account,
      transport: http(chain.bundlerUrl, { retryCount: 0 }),
      paymaster: gatewayPaymaster({ deployment: aa, usdc, escrow, signer: parameters.paymasterSigner }),
    });
    const userOpHash = await bundler.sendUserOperation({
      calls: escrowDepositCalls({ usdc, escrow, wallet: wallet.address, amountMicros: balanceMicros }),
    });
    const receipt = await bundler.waitForUserOperationReceipt({
      hash: userOpHash,
      pollingInterval: 100,
      timeout: parameters.timeoutMs ?? 60_000,
    });
    if (!receipt.success) {
      throw new WalletError(
        `the sweep of ${wallet.address} reverted on chain (UserOperation ${userOpHash}): ${receipt.reason ?? "no reason"}`,
      );
    }
    return { swept: true, amountMicros: balanceMicros, userOpHash, transactionHash: receipt.receipt.transactionHash };
  });
  if (!locked.ran) throw new WalletError(`another operation of ${wallet.address} (a sweep or a claim) is already running`);
  return locked.value;
}
