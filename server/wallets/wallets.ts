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
 * The owner keys' encryption is ./wallet-keys.ts; the sweep of a wallet's USDC into the escrow is ./sweep.ts.
 */
import { toSimpleSmartAccount } from "permissionless/accounts";
import { getAddress, type Address, type Chain, type Client, type Hex, type LocalAccount, type Transport } from "viem";
import { generatePrivateKey, privateKeyToAccount, toAccount } from "viem/accounts";
import type { AaDeployment } from "./aa";
import { linkAddress, normalizeAddress, type LinkAddressReturnType } from "../settlement/addresses";
import type { Ledger } from "../ledger/ledger";
import { type WalletRecord, WalletsStore } from "./wallets-store";

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

import { WalletError } from "./wallet-error";
import { decryptOwnerKey, encryptOwnerKey, walletEncryptionKey } from "./wallet-keys";

/** What computing a smart account's address needs: a client of the chain holding the EntryPoint and factory. */
export type WalletChain = {
  /** Any viem client of the chain (eth_call is all it is used for here). */
  client: Client<Transport, Chain | undefined, undefined>;
  aa: Pick<AaDeployment, "entryPoint" | "accountFactory">;
};

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

/** The gateway's database (`ledger.db`), which the wallet functions read the wallets' store through. */
type Handle = Ledger["db"];

/** The account's embedded wallet, if it has one. Never includes the owner key. */
export async function getEmbeddedWallet(db: Handle, accountId: string): Promise<EmbeddedWallet | undefined> {
  const record = await new WalletsStore(db).get(accountId);
  return record ? toWallet(record) : undefined;
}

/** Every embedded wallet, oldest first (what a sweeper polls). */
export async function listEmbeddedWallets(db: Handle): Promise<EmbeddedWallet[]> {
  return (await new WalletsStore(db).list()).map(toWallet);
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
 * A link refused (say the account already has another address) is reported in `link`, not thrown. Two
 * calls at once (two replicas signing the account in) both compute a wallet; the first stored is the one
 * both return, and only it is linked.
 */
export async function ensureEmbeddedWallet(
  ledger: Ledger,
  accountId: string,
  owner: WalletOwner,
  options: EnsureEmbeddedWalletOptions,
): Promise<EnsureEmbeddedWalletReturnType> {
  const existing = await getEmbeddedWallet(ledger.db, accountId);
  if (existing) return { ...existing, created: false, link: await linkAddress(ledger, { accountId, address: existing.address }) };
  if (!(await ledger.getAccount(accountId))) throw new WalletError(`no account ${accountId}`);

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

  // Durable before it is linked and reported: the encrypted key is the only copy of the owner key.
  const store = new WalletsStore(ledger.db);
  const stored = await ledger.db.transaction(
    async (tx) => {
      await store.insertIfAbsent(
        {
          accountId,
          address,
          ownerKind: owner.kind,
          ownerAddress: signer.address.toLowerCase(),
          encryptedOwnerKey: encrypted,
          createdAtMs: now,
        },
        tx,
      );
      return toWallet((await store.get(accountId, tx))!);
    },
    { durable: true },
  );
  const link = await linkAddress(ledger, { accountId, address: stored.address });
  return { ...stored, created: stored.address.toLowerCase() === address, link };
}

/**
 * The server-held owner of an account's wallet, decrypted, as a viem account. Throws WalletError for a SIWE
 * wallet (the gateway has no key) or when WALLET_ENCRYPTION_KEY is unset or wrong.
 */
export async function serverOwnerOf(db: Handle, accountId: string, encryptionKey: string | undefined): Promise<LocalAccount> {
  const row = await new WalletsStore(db).get(accountId);
  if (!row) throw new WalletError(`${accountId} has no embedded wallet`);
  if (row.ownerKind !== "server" || !row.encryptedOwnerKey) {
    throw new WalletError(`${accountId}'s wallet is owned by ${getAddress(row.ownerAddress)}, whose signature the gateway does not hold`);
  }
  const owner = privateKeyToAccount(decryptOwnerKey(row.encryptedOwnerKey, walletEncryptionKey(encryptionKey), accountId, row.address));
  if (owner.address.toLowerCase() !== row.ownerAddress) throw new WalletError(`${accountId}'s owner key does not match its owner address`);
  return owner;
}

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
