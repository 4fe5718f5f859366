import { expect } from "chai";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { toSimpleSmartAccount } from "permissionless/accounts";
import { parseAbi, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { sweepWalletToEscrow } from "../../server/wallets/sweep";
import { WalletError } from "../../server/wallets/wallet-error";
import { decryptOwnerKey, encryptOwnerKey, walletEncryptionKey } from "../../server/wallets/wallet-keys";
import { ensureEmbeddedWallet, getEmbeddedWallet, serverOwnerOf, type WalletChain } from "../../server/wallets/wallets";
import { accountForAddress } from "../../server/settlement/addresses";
import { settlementStores } from "../../server/settlement/store";
import { DepositIndexer } from "../../server/settlement/indexer";
import { startAaStack, type AaStack } from "../helpers/aa-stack";
import { makeTempDir } from "../helpers/ledger";
import { openDatabase } from "../../server/db/db";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { Ledger } from "../../server/ledger/ledger";
import { SCHEMA } from "../../server/schema";

const USDC = 1_000_000n;
const KEY = "5a".repeat(32);
const FACTORY_ABI = parseAbi(["function getAddress(address owner, uint256 salt) view returns (address)"]);

describe("embedded wallets", function () {
  this.timeout(60_000);
  let stack: AaStack;
  let chain: WalletChain;
  const dirs: { remove(): void }[] = [];

  before(async () => {
    stack = await startAaStack();
    chain = { client: stack.node.publicClient, aa: stack.aa };
  });
  after(async () => {
    await stack?.stop();
    for (const dir of dirs) dir.remove();
  });

  /** A ledger with Ada's account on a fresh SQLite database (in memory unless `file`); `sqlite` is its raw connection. */
  const freshLedger = async (file?: string) => {
    const sqlite = openDatabase(file ?? ":memory:", SCHEMA);
    const db = new SqliteDatabase(sqlite);
    const ledger = await Ledger.open(db);
    await ledger.ensureAccount({ id: "user:ada", kind: "user", name: "Ada" });
    return { db, sqlite, ledger };
  };

  describe("the counterfactual address", () => {
    it("of a SIWE account is the SimpleAccount its own address owns: deterministic, stored and linked for deposits", async () => {
      const siweAddress = privateKeyToAccount(generatePrivateKey()).address;
      const { db, ledger } = await freshLedger();
      const wallet = await ensureEmbeddedWallet(ledger, "user:ada", { kind: "siwe", address: siweAddress.toLowerCase() }, { chain });

      const onChain = await stack.node.publicClient.readContract({
        address: stack.aa.accountFactory,
        abi: FACTORY_ABI,
        functionName: "getAddress",
        args: [siweAddress, 0n],
      });
      expect(wallet.address).to.equal(onChain);
      expect(wallet).to.include({ created: true, ownerKind: "siwe", ownerAddress: siweAddress });
      expect(wallet.link).to.include({ ok: true, created: true });
      expect(await stack.node.publicClient.getCode({ address: wallet.address }), "counterfactual: nothing deployed").to.equal(undefined);
      expect(await accountForAddress(settlementStores(db).addresses, wallet.address)).to.equal("user:ada");
      const row = (await db.one("SELECT * FROM embedded_wallets"))!;
      expect(row).to.include({
        account_id: "user:ada",
        address: onChain.toLowerCase(),
        owner_kind: "siwe",
        owner_address: siweAddress.toLowerCase(),
        encrypted_owner_key: null,
      });

      // Asking again changes nothing; another database computes the same address for the same owner.
      const again = await ensureEmbeddedWallet(ledger, "user:ada", { kind: "server" }, { chain });
      expect(again).to.include({ created: false, address: wallet.address, ownerKind: "siwe" });
      expect(await db.value("SELECT COUNT(*) FROM embedded_wallets")).to.equal(1n);
      const other = await freshLedger();
      const elsewhere = await ensureEmbeddedWallet(other.ledger, "user:ada", { kind: "siwe", address: siweAddress }, { chain });
      expect(elsewhere.address).to.equal(wallet.address);
    });

    it("refuses an unknown account or a malformed owner address", async () => {
      const { ledger } = await freshLedger();
      await expectRejection(
        ensureEmbeddedWallet(
          ledger,
          "user:nobody",
          { kind: "siwe", address: privateKeyToAccount(generatePrivateKey()).address },
          { chain },
        ),
        "no account user:nobody",
      );
      await expectRejection(ensureEmbeddedWallet(ledger, "user:ada", { kind: "siwe", address: "0x1234" }, { chain }), "is not an address");
    });
  });

  describe("a server-held owner key", () => {
    it("is stored only encrypted (AES-256-GCM): it round-trips, and the raw key is nowhere in the database files", async () => {
      const dir = makeTempDir();
      dirs.push(dir);
      const file = dir.file("wallets.db");
      const { db, sqlite, ledger } = await freshLedger(file);
      const wallet = await ensureEmbeddedWallet(ledger, "user:ada", { kind: "server" }, { chain, encryptionKey: KEY });
      expect(wallet).to.include({ created: true, ownerKind: "server" });

      const owner = await serverOwnerOf(db, "user:ada", KEY);
      expect(owner.address).to.equal(wallet.ownerAddress);
      const account = await toSimpleSmartAccount({
        client: stack.node.publicClient,
        owner,
        entryPoint: { address: stack.aa.entryPoint, version: "0.7" },
      });
      expect(account.address).to.equal(wallet.address);

      const blob = (await db.value<Buffer>("SELECT encrypted_owner_key FROM embedded_wallets"))!;
      const rawKey = decryptOwnerKey(blob, walletEncryptionKey(KEY), "user:ada", wallet.address);
      expect(privateKeyToAccount(rawKey).address).to.equal(wallet.ownerAddress);
      await db.durable();
      sqlite.pragma("wal_checkpoint(TRUNCATE)");
      const files = readdirSync(path.dirname(file)).map((name) => readFileSync(path.join(path.dirname(file), name)));
      const raw = Buffer.from(rawKey.slice(2), "hex");
      for (const bytes of files) {
        expect(bytes.includes(raw), "raw key bytes").to.equal(false);
        expect(bytes.toString("latin1").toLowerCase().includes(rawKey.slice(2)), "raw key hex").to.equal(false);
      }
      // Never part of what the wallet API returns.
      expect(JSON.stringify(await getEmbeddedWallet(db, "user:ada"))).to.not.contain(rawKey.slice(2));
      expect(JSON.stringify(wallet, (_k, v) => (typeof v === "bigint" ? v.toString() : v))).to.not.contain(rawKey.slice(2));
    });

    it("does not open under another key, for another account or another address; 32-byte keys in hex or base64", () => {
      const privateKey = generatePrivateKey();
      const key = walletEncryptionKey(KEY);
      const wallet = privateKeyToAccount(generatePrivateKey()).address;
      const blob = encryptOwnerKey(privateKey, key, "user:ada", wallet);
      expect(decryptOwnerKey(blob, key, "user:ada", wallet)).to.equal(privateKey);
      expect(() => decryptOwnerKey(blob, walletEncryptionKey("6b".repeat(32)), "user:ada", wallet)).to.throw(
        WalletError,
        "does not decrypt",
      );
      expect(() => decryptOwnerKey(blob, key, "user:eve", wallet)).to.throw(WalletError, "does not decrypt");
      expect(() => decryptOwnerKey(blob, key, "user:ada", privateKeyToAccount(generatePrivateKey()).address)).to.throw(
        WalletError,
        "does not decrypt",
      );
      const tampered = Buffer.from(blob);
      tampered[tampered.length - 1] ^= 1;
      expect(() => decryptOwnerKey(tampered, key, "user:ada", wallet)).to.throw(WalletError, "does not decrypt");
      expect(walletEncryptionKey(key.toString("base64"))).to.deep.equal(key);
      expect(walletEncryptionKey(`0x${KEY}`)).to.deep.equal(key);
      expect(() => walletEncryptionKey("ab".repeat(16))).to.throw(WalletError, "must be 32 bytes");
    });

    it("cannot be created or used without WALLET_ENCRYPTION_KEY: a clear error, and nothing stored", async () => {
      const { db, ledger } = await freshLedger();
      await expectRejection(ensureEmbeddedWallet(ledger, "user:ada", { kind: "server" }, { chain }), "WALLET_ENCRYPTION_KEY is not set");
      expect(await db.value("SELECT COUNT(*) FROM embedded_wallets")).to.equal(0n);
      await ensureEmbeddedWallet(ledger, "user:ada", { kind: "server" }, { chain, encryptionKey: KEY });
      await expectRejection(serverOwnerOf(db, "user:ada", ""), "WALLET_ENCRYPTION_KEY is not set", WalletError);
      await expectRejection(serverOwnerOf(db, "user:ada", "77".repeat(32)), "does not decrypt", WalletError);
    });
  });

  describe("crypto top-up", () => {
    it("USDC sent to a wallet reaches the escrow by one sponsored UserOperation and the ledger once, through the deposit indexer", async () => {
      const { db, ledger } = await freshLedger();
      const wallet = await ensureEmbeddedWallet(ledger, "user:ada", { kind: "server" }, { chain, encryptionKey: KEY });
      const indexer = new DepositIndexer({
        ledger,
        publicClient: stack.node.publicClient,
        escrowAddress: stack.deployment.escrow,
        deployBlock: stack.deployment.deployBlock,
        confirmations: 0,
        log: () => {},
      });
      const sweep = () =>
        sweepWalletToEscrow({
          ledger,
          accountId: "user:ada",
          chain: { ...chain, bundlerUrl: stack.bundler.url },
          aa: stack.aa,
          usdc: stack.deployment.usdc,
          escrow: stack.deployment.escrow,
          paymasterSigner: stack.paymasterSigner,
          encryptionKey: KEY,
          minimumMicros: USDC,
        });

      expect(await sweep()).to.deep.equal({ swept: false, reason: "empty", balanceMicros: 0n });
      await stack.mint(wallet.address, USDC / 2n);
      expect(await sweep()).to.deep.equal({ swept: false, reason: "below_minimum", balanceMicros: USDC / 2n });
      await stack.mint(wallet.address, 7n * USDC);

      const result = await sweep();
      expect(result).to.include({ swept: true, amountMicros: 7n * USDC + USDC / 2n });
      expect(await stack.node.publicClient.getBalance({ address: wallet.address }), "the wallet never held ETH").to.equal(0n);

      await indexer.poll();
      await indexer.poll();
      expect((await ledger.balance("user:ada")).availableMicros).to.equal(7n * USDC + USDC / 2n);
      const deposits = await db.all<{ tx_hash: string; account_id: string; amount: bigint }>(
        "SELECT tx_hash, account_id, amount FROM chain_deposits",
      );
      expect(deposits).to.deep.equal([
        {
          tx_hash: (result as { transactionHash: Hex }).transactionHash.toLowerCase(),
          account_id: "user:ada",
          amount: 7n * USDC + USDC / 2n,
        },
      ]);
      expect(await db.value("SELECT COUNT(*) FROM entries WHERE kind = 'deposit'")).to.equal(1n);

      // Nothing left to move: a second sweep does nothing and the ledger stays put.
      expect(await sweep()).to.deep.equal({ swept: false, reason: "empty", balanceMicros: 0n });
      await indexer.poll();
      expect((await ledger.balance("user:ada")).availableMicros).to.equal(7n * USDC + USDC / 2n);
    });

    it("a SIWE wallet is swept only with its owner's signature", async () => {
      const owner = privateKeyToAccount(generatePrivateKey());
      const { ledger } = await freshLedger();
      const wallet = await ensureEmbeddedWallet(ledger, "user:ada", { kind: "siwe", address: owner.address }, { chain });
      await stack.mint(wallet.address, 2n * USDC);
      const sweep = (ownerSigner?: typeof owner) =>
        sweepWalletToEscrow({
          ledger,
          accountId: "user:ada",
          chain: { ...chain, bundlerUrl: stack.bundler.url },
          aa: stack.aa,
          usdc: stack.deployment.usdc,
          escrow: stack.deployment.escrow,
          paymasterSigner: stack.paymasterSigner,
          ...(ownerSigner ? { ownerSigner } : {}),
        });
      await expectRejection(sweep(), "pass its signer");
      await expectRejection(sweep(privateKeyToAccount(generatePrivateKey())), "is not user:ada's wallet owner");
      expect(await sweep(owner)).to.include({ swept: true, amountMicros: 2n * USDC });
    });
  });
});

async function expectRejection(promise: Promise<unknown>, message: string, type: new (...args: never[]) => Error = Error): Promise<void> {
  let error: unknown;
  try {
    await promise;
  } catch (caught) {
    error = caught;
  }
  expect(error, `expected a rejection with "${message}"`).to.be.instanceOf(type);
  expect((error as Error).message).to.contain(message);
}
