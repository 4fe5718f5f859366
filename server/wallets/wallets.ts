/**
 * Embedded wallets: every account gets an ERC-4337 smart account (permissionless's SimpleAccount, EntryPoint
 * v0.7) at a counterfactual address, stored in `embedded_wallets` and linked to the account as its deposit
 * address (server/settlement/addresses.ts), so whatever the escrow credits to it becomes the account's balance.
 *
 * Owners: a SIWE account's own wallet address owns the smart account (the gateway holds no key and needs that
 * wallet's signature to move anything); an e-mail or OAuth account's owner key is generated here and stored
 * only encrypted, AES-256-GCM under WALLET_ENCRYPTION_KEY, bound to the account and the wallet address (a
 * ciphertext copied to another row does not decrypt). The key is never logged and never returned by the API.
 *
 * Top-up by crypto transfer: USDC sent to the wallet address is moved into the escrow by one UserOperation,
 * `approve(escrow, amount)` + `depositFor(wallet, amount)`, whose gas the gateway paymaster sponsors
 * (sweepWalletToEscrow); the deposit indexer then credits the ledger like any deposit, once.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { toSimpleSmartAccount } from "permissionless/accounts";
import { erc20Abi, getAddress, http, type Address, type Chain, type Client, type Hex, type LocalAccount, type Transport } from "viem";
import { createBundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount, toAccount } from "viem/accounts";
import { gatewayPaymaster, type AaDeployment } from "./aa";
import { escrowDepositCalls } from "./aa-flows";
import { linkAddress, normalizeAddress, type LinkAddressReturnType } from "../settlement/addresses";
import type { Ledger } from "../ledger/ledger";
import { SqliteWalletsStore, type WalletRecord } from "./wallets-store";

/** Who owns an embedded wallet: a SIWE user's own address, or a key the server generates and keeps encrypted. */
export type WalletOwner = { kind: "siwe"; address: string } | { kind: "server" };

export interface EmbeddedWallet {
  accountId: string;
  /** The smart account's address (checksummed): where the user sends USDC. */
  address: Address;
  ownerKind: "siwe" | "server";
  ownerAddress: Address;
  createdAt: number;
}

// Internal error, plain on purpose: a broken invariant of the gateway's own wallets (logged; a client only ever sees internal_error).
export class WalletError extends Error {
  override name = "WalletError";
}

/** What computing a smart account's address needs: a client of the chain holding the EntryPoint and factory. */
export type WalletChain = {
  /** Any viem client of the chain (eth_call is all it is used for here). */
  client: Client<Transport, Chain | undefined, undefined>;
  aa: Pick<AaDeployment, "entryPoint" | "accountFactory">;
};

// ---------------------------------------------------------------------------------------------------------
// Owner key encryption
// ---------------------------------------------------------------------------------------------------------

const KEY_FORMAT_V1 = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** WALLET_ENCRYPTION_KEY (64 hex digits, 0x optional, or base64) as 32 bytes; a clear error when unset or wrong. */
export function walletEncryptionKey(configured: string | undefined): Buffer {
  const raw = (configured ?? "").trim();
  if (raw === "") {
    throw new WalletError(
      "WALLET_ENCRYPTION_KEY is not set: it encrypts the owner keys of e-mail and OAuth accounts' embedded wallets " +
        "(32 bytes as 64 hex digits or base64, e.g. `openssl rand -hex 32`)",
    );
  }
  const hex = raw.replace(/^0x/i, "");
  const key = /^[0-9a-fA-F]{64}$/.test(hex) ? Buffer.from(hex, "hex") : Buffer.from(raw, "base64");
  if (key.length !== 32) throw new WalletError("WALLET_ENCRYPTION_KEY must be 32 bytes: 64 hex digits or base64");
  return key;
}

function associatedData(accountId: string, wallet: string): Buffer {
  return Buffer.from(`skill-gateway embedded wallet v1\0${accountId}\0${wallet.toLowerCase()}`, "utf8");
}

/** `version (1) | iv (12) | tag (16) | ciphertext (32)`, authenticated together with the account and wallet. */
export function encryptOwnerKey(privateKey: Hex, key: Buffer, accountId: string, wallet: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(associatedData(accountId, wallet));
  const ciphertext = Buffer.concat([cipher.update(Buffer.from(privateKey.slice(2), "hex")), cipher.final()]);
  return Buffer.concat([Buffer.from([KEY_FORMAT_V1]), iv, cipher.getAuthTag(), ciphertext]);
}

export function decryptOwnerKey(blob: Buffer, key: Buffer, accountId: string, wallet: string): Hex {
  if (blob.length !== 1 + IV_BYTES + TAG_BYTES + 32 || blob[0] !== KEY_FORMAT_V1) {
    throw new WalletError(`the owner key of ${accountId}'s wallet is not in a known format`);
  }
  const iv = blob.subarray(1, 1 + IV_BYTES);
  const tag = blob.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
  const decipher = createDecipheriv("aes-256-gcm", key, iv);
  decipher.setAAD(associatedData(accountId, wallet));
  decipher.setAuthTag(tag);
  try {
    const plain = Buffer.concat([decipher.update(blob.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
    return `0x${plain.toString("hex")}`;
  } catch {
    // Deliberately vague: never say more about a key than that it did not open.
    throw new WalletError(`the owner key of ${accountId}'s wallet does not decrypt with WALLET_ENCRYPTION_KEY`);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Wallets
// ---------------------------------------------------------------------------------------------------------

/** An owner the server cannot sign for: enough to compute the smart account's address. */
export function addressOnlyOwner(address: Address): LocalAccount {
  const refuse = async (): Promise<never> => {
    throw new WalletError(`the gateway holds no key for ${address}: its owner must sign`);
  };
  return toAccount({ address, signMessage: refuse, signTransaction: refuse, signTypedData: refuse });
}

/** The SimpleAccount (v0.7) of `owner` on `chain`, as permissionless computes it (salt/index 0). */
export async function smartAccountFor(chain: WalletChain, owner: LocalAccount) {
  return toSimpleSmartAccount({
    client: chain.client,
    owner,
    factoryAddress: chain.aa.accountFactory,
    entryPoint: { address: chain.aa.entryPoint, version: "0.7" },
  });
}

function toWallet(record: WalletRecord): EmbeddedWallet {
  return {
    accountId: record.accountId,
    address: getAddress(record.address),
    ownerKind: record.ownerKind,
    ownerAddress: getAddress(record.ownerAddress),
    createdAt: record.createdAtMs,
  };
}

/** The gateway's SQLite handle (`ledger.db`), which the wallet functions read the wallets' store through. */
type Handle = Ledger["db"];

/** The account's embedded wallet, if it has one. Never includes the owner key. */
export function getEmbeddedWallet(db: Handle, accountId: string): EmbeddedWallet | undefined {
  const record = new SqliteWalletsStore(db).get(accountId);
  return record ? toWallet(record) : undefined;
}

/** Every embedded wallet, oldest first (what a sweeper polls). */
export function listEmbeddedWallets(db: Handle): EmbeddedWallet[] {
  return new SqliteWalletsStore(db).list().map(toWallet);
}

export type EnsureEmbeddedWalletOptions = {
  chain: WalletChain;
  /** WALLET_ENCRYPTION_KEY (config.walletEncryptionKey); needed only for a server-owned wallet. */
  encryptionKey?: string;
  now?: () => number;
};

export type EnsureEmbeddedWalletReturnType = EmbeddedWallet & {
  /** False when the account already had its wallet. */
  created: boolean;
  /** Linking the wallet as the account's deposit address (one per account; see addresses.ts). */
  link: LinkAddressReturnType;
};

/**
 * The account's embedded wallet, created on first use: computes the counterfactual SimpleAccount of `owner`
 * (for a server owner, of a fresh key, stored encrypted), stores it, and links its address to the account so
 * deposits to it are credited. Idempotent: a second call returns the stored wallet, whatever `owner` says.
 * A link refused (say the account already has another address) is reported in `link`, not thrown.
 */
export async function ensureEmbeddedWallet(
  ledger: Ledger,
  accountId: string,
  owner: WalletOwner,
  options: EnsureEmbeddedWalletOptions,
): Promise<EnsureEmbeddedWalletReturnType> {
  const existing = getEmbeddedWallet(ledger.db, accountId);
  if (existing) return { ...existing, created: false, link: await linkAddress(ledger, { accountId, address: existing.address }) };
  if (!ledger.getAccount(accountId)) throw new WalletError(`no account ${accountId}`);

  let signer: LocalAccount;
  let privateKey: Hex | undefined;
  let key: Buffer | undefined;
  if (owner.kind === "siwe") {
    const address = normalizeAddress(owner.address);
    if (!address) throw new WalletError(`"${owner.address}" is not an address`);
    signer = addressOnlyOwner(getAddress(address));
  } else {
    key = walletEncryptionKey(options.encryptionKey); // before generating anything: fail early and clearly
    privateKey = generatePrivateKey();
    signer = privateKeyToAccount(privateKey);
  }
  const account = await smartAccountFor(options.chain, signer);
  const address = account.address.toLowerCase();
  const encrypted = privateKey && key ? encryptOwnerKey(privateKey, key, accountId, address) : null;
  const now = (options.now ?? Date.now)();

  ledger.commit.run(() => {
    new SqliteWalletsStore(ledger.db).insertIfAbsent({
      accountId,
      address,
      ownerKind: owner.kind,
      ownerAddress: signer.address.toLowerCase(),
      encryptedOwnerKey: encrypted,
      createdAtMs: now,
    });
  });
  const stored = getEmbeddedWallet(ledger.db, accountId)!;
  const link = await linkAddress(ledger, { accountId, address: stored.address });
  return { ...stored, created: stored.address.toLowerCase() === address, link };
}

/**
 * The server-held owner of an account's wallet, decrypted, as a viem account. Throws WalletError for a SIWE
 * wallet (the gateway has no key) or when WALLET_ENCRYPTION_KEY is unset or wrong.
 */
export function serverOwnerOf(db: Handle, accountId: string, encryptionKey: string | undefined): LocalAccount {
  const row = new SqliteWalletsStore(db).get(accountId);
  if (!row) throw new WalletError(`${accountId} has no embedded wallet`);
  if (row.ownerKind !== "server" || !row.encryptedOwnerKey) {
    throw new WalletError(`${accountId}'s wallet is owned by ${getAddress(row.ownerAddress)}, whose signature the gateway does not hold`);
  }
  const owner = privateKeyToAccount(decryptOwnerKey(row.encryptedOwnerKey, walletEncryptionKey(encryptionKey), accountId, row.address));
  if (owner.address.toLowerCase() !== row.ownerAddress) throw new WalletError(`${accountId}'s owner key does not match its owner address`);
  return owner;
}

// ---------------------------------------------------------------------------------------------------------
// Crypto top-up: the wallet's USDC into the escrow
// ---------------------------------------------------------------------------------------------------------

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

// One sponsored operation per wallet at a time in this process (a sweep, a claim): two would share a nonce.
const busyWallets = new Set<string>();

/**
 * Marks `wallet` busy while `fn` runs; returns `{ ran: false }` without running it when another operation of
 * the wallet holds the mark.
 */
export async function withWalletLock<T>(wallet: Address, fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
  const key = wallet.toLowerCase();
  if (busyWallets.has(key)) return { ran: false };
  busyWallets.add(key);
  try {
    return { ran: true, value: await fn() };
  } finally {
    busyWallets.delete(key);
  }
}

/**
 * Moves all the USDC in the account's embedded wallet into the escrow, credited to the wallet, by ONE
 * UserOperation (`approve` + `depositFor`, deploying the account first if needed) sponsored by the gateway
 * paymaster. The ledger is credited by the deposit indexer from the escrow's `Deposited` event, not here, so
 * it happens once whatever retries. One operation per wallet at a time in this process (withWalletLock).
 */
export async function sweepWalletToEscrow(parameters: SweepWalletParameters): Promise<SweepWalletReturnType> {
  const { ledger, accountId, chain, aa, usdc, escrow } = parameters;
  const wallet = getEmbeddedWallet(ledger.db, accountId);
  if (!wallet) throw new WalletError(`${accountId} has no embedded wallet`);
  const locked = await withWalletLock(wallet.address, async (): Promise<SweepWalletReturnType> => {
    let owner: LocalAccount;
    if (wallet.ownerKind === "server") owner = serverOwnerOf(ledger.db, accountId, parameters.encryptionKey);
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
