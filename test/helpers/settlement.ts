import hre from "hardhat";
import { getAddress, parseAbi, type Address, type Hash } from "viem";
import { linkAddress } from "../../server/settlement/addresses";
import { DepositIndexer } from "../../server/settlement/indexer";
import { BATCH_SETTLED_EVENT } from "../../server/settlement/reconcile";
import { Settler, type SettlerLog, type SettlerParameters, type SettlerWalletClient } from "../../server/settlement/settler";
import { CallsStore } from "../../server/gateway/calls-store";
import { openDatabase } from "../../server/db/db";
import type { Sql } from "../../server/db/sql";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { SCHEMA } from "../../server/schema";
import { computeCharge } from "../../server/ledger/fees";
import { uuidv7 } from "../../server/db/ids";
import { Ledger } from "../../server/ledger/ledger";
import { startLocalChain, type LocalChain, type UserName } from "./chain";

type HardhatWallet = Awaited<ReturnType<typeof hre.viem.getWalletClients>>[number];

/** The sellers of the settlement tests; each has a wallet of its own to claim with. */
export const SELLERS = ["acme", "globex"] as const;
export type SellerName = (typeof SELLERS)[number];

export const userId = (user: UserName) => `user:${user}`;
export const sellerId = (seller: SellerName) => `seller:${seller}`;

const ESCROW_ABI = parseAbi([
  "function claim() returns (uint256)",
  "function earnings(address seller) view returns (uint256)",
  "function balances(address account) view returns (uint256)",
]);

/** The local chain of test/helpers/chain.ts plus the settler's key, the sellers' wallets and the treasury's. */
export interface SettlementChain extends LocalChain {
  settlerWallet: HardhatWallet;
  /** Holds the admin role and receives platform fees (deployContracts' default treasury). */
  treasuryWallet: HardhatWallet;
  sellerWallet(seller: SellerName): HardhatWallet;
  sellerAddress(seller: SellerName): Address;
  earnings(address: Address): Promise<bigint>;
  /** `who` claims its earnings on-chain. */
  claim(who: HardhatWallet): Promise<void>;
  /** Every BatchSettled event so far: batch number and transaction. */
  settledBatches(): Promise<{ batchNumber: bigint; transactionHash: Hash }[]>;
}

export async function startSettlementChain(): Promise<SettlementChain> {
  const chain = await startLocalChain();
  const wallets = await hre.viem.getWalletClients();
  const sellers: Record<SellerName, HardhatWallet> = { acme: wallets[6], globex: wallets[7] };
  const publicClient = await hre.viem.getPublicClient();
  return Object.assign(chain, {
    settlerWallet: wallets[1],
    treasuryWallet: wallets[0],
    sellerWallet: (seller: SellerName) => sellers[seller],
    sellerAddress: (seller: SellerName) => getAddress(sellers[seller].account.address),
    earnings: (address: Address) =>
      publicClient.readContract({ address: chain.deployment.escrow, abi: ESCROW_ABI, functionName: "earnings", args: [address] }),
    claim: async (who: HardhatWallet) => {
      const { escrow } = chain.deployment;
      const hash = await who.writeContract({
        address: escrow,
        abi: ESCROW_ABI,
        functionName: "claim",
        account: who.account,
        chain: who.chain,
      });
      await publicClient.waitForTransactionReceipt({ hash });
    },
    settledBatches: async () => {
      const logs = await publicClient.getLogs({
        address: chain.deployment.escrow,
        event: BATCH_SETTLED_EVENT,
        fromBlock: chain.deployment.deployBlock,
        strict: true,
      });
      return logs.map((log) => ({ batchNumber: log.args.batchNumber, transactionHash: log.transactionHash }));
    },
  });
}

/** Polls `condition` every 5 ms until it holds; throws after `timeoutMs`. */
export async function waitUntil(condition: () => Promise<boolean>, timeoutMs = 5_000, what = "the condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * A settlement ledger beside the chain: accounts linked to their chain addresses, real deposits (made on-chain
 * and credited by the deposit indexer), paid calls written as the call path writes them (hold, capture and
 * call row in one transaction), and settlers over it. On SQLite, in memory or in `file` (a crash test
 * reopens the file).
 */
export class SettlementFixture {
  readonly calls: CallsStore;
  readonly indexer: DepositIndexer;
  readonly logged: string[] = [];
  private readonly settlers: Settler[] = [];

  private constructor(
    readonly chain: SettlementChain,
    readonly db: SqliteDatabase,
    readonly ledger: Ledger,
    /** The database file (":memory:" when none was given). */
    readonly file: string,
  ) {
    this.calls = new CallsStore(this.db);
    this.indexer = new DepositIndexer({
      ledger: this.ledger,
      publicClient: chain.publicClient,
      escrowAddress: chain.deployment.escrow,
      deployBlock: chain.deployment.deployBlock,
      confirmations: 0,
      log: (message) => this.logged.push(message),
    });
  }

  static async open(chain: SettlementChain, file = ":memory:"): Promise<SettlementFixture> {
    const db = new SqliteDatabase(openDatabase(file, SCHEMA));
    return new SettlementFixture(chain, db, await Ledger.open(db), file);
  }

  /** Creates the user's account and links its wallet address; deposits `depositMicros` on-chain and credits it. */
  async addUser(user: UserName, depositMicros = 0n): Promise<void> {
    await this.ledger.ensureAccount({ id: userId(user), kind: "user", name: user });
    await this.link(userId(user), this.chain.address(user));
    if (depositMicros > 0n) await this.deposit(user, depositMicros);
  }

  /** A real deposit: on-chain into the user's escrow balance, then credited to the ledger by the indexer. */
  async deposit(user: UserName, amountMicros: bigint): Promise<void> {
    const hash = await this.chain.deposit(user, amountMicros);
    const receipt = await this.chain.receipt(hash);
    if (receipt.status !== "success") throw new Error(`the deposit of ${amountMicros} by ${user} reverted`);
    const { credited } = await this.indexer.poll();
    if (credited !== 1) throw new Error(`the indexer credited ${credited} deposit(s), expected 1`);
  }

  async addSeller(seller: SellerName, linked = true): Promise<void> {
    await this.ledger.ensureAccount({ id: sellerId(seller), kind: "seller", name: seller });
    if (linked) await this.link(sellerId(seller), this.chain.sellerAddress(seller));
  }

  async link(accountId: string, address: Address): Promise<void> {
    const result = await linkAddress(this.ledger, { accountId, address });
    if (!result.ok) throw new Error(`linking ${address} to ${accountId} failed: ${result.reason}`);
  }

  /** A successful paid call of `priceMicros` (10% fee included); returns the call id. */
  async pay(user: UserName, seller: SellerName, priceMicros: bigint): Promise<string> {
    const callId = uuidv7();
    await this.db.transaction(async (tx) => {
      const held = await this.ledger.hold(
        {
          accountId: userId(user),
          sellerAccountId: sellerId(seller),
          skillId: `skill:${seller}`,
          charge: computeCharge(priceMicros, "included", 1000n),
        },
        tx,
      );
      if (!held.ok) throw new Error(`${user} cannot pay ${priceMicros}: ${held.reason}`);
      if (!(await this.ledger.capture(held.hold.id, tx)).ok) throw new Error("capture failed");
      await this.record(tx, callId, user, seller, 200, priceMicros, held.hold.id);
    });
    return callId;
  }

  /** A call whose backend failed: its hold was released, nothing charged. Returns the call id. */
  async failedCall(user: UserName, seller: SellerName): Promise<string> {
    const callId = uuidv7();
    await this.db.transaction((tx) => this.record(tx, callId, user, seller, 502, 0n, null));
    return callId;
  }

  settler(overrides: Partial<SettlerParameters> = {}): Settler {
    const log: SettlerLog = (message) => this.logged.push(message);
    const settler = new Settler({
      ledger: this.ledger,
      publicClient: this.chain.publicClient,
      walletClient: this.chain.settlerWallet,
      escrowAddress: this.chain.deployment.escrow,
      deployBlock: this.chain.deployment.deployBlock,
      maxCallsPerBatch: 100,
      retryBaseMs: 10,
      maxBackoffMs: 50,
      log,
      ...overrides,
    });
    this.settlers.push(settler);
    return settler;
  }

  /** Stops every settler, commits what is pending and closes the database. */
  async close(): Promise<void> {
    for (const settler of this.settlers) await settler.stop();
    await this.indexer.stop();
    await this.db.close();
  }

  /** A process crash: the database closes with whatever is not committed lost, and no settler runs on. */
  async crash(): Promise<void> {
    for (const settler of this.settlers) await settler.stop();
    await this.indexer.stop();
    this.db.db.close();
  }

  private record(
    tx: Sql,
    callId: string,
    user: UserName,
    seller: SellerName,
    httpStatus: number,
    chargedMicros: bigint,
    holdId: string | null,
  ): Promise<void> {
    return this.calls.record(
      {
        id: callId,
        accountId: userId(user),
        apiKeyId: "key:test",
        skillId: `skill:${seller}`,
        endpoint: "call",
        httpStatus,
        outcome: httpStatus === 200 ? "success" : "skill_error",
        chargedMicros,
        holdId,
        latencyUs: 1_000,
        createdAtMs: Date.now(),
      },
      tx,
    );
  }
}

/** What a wallet wrapper does on its next `settle` sends. */
export type WalletFault =
  /** Throws before anything reaches the node: the process died after recording, before sending. */
  | "fail_before_send"
  /** Sends, then throws as if the answer was lost: the process died after sending, before marking. */
  | "lose_answer";

/** The settler's wallet with faults queued for its next sends, and a count of what really reached the node. */
export function faultyWallet(wallet: SettlerWalletClient, faults: WalletFault[]): SettlerWalletClient & { sent: Hash[] } {
  const sent: Hash[] = [];
  const writeContract = (async (args: Parameters<SettlerWalletClient["writeContract"]>[0]) => {
    const fault = faults.shift();
    if (fault === "fail_before_send") throw new Error("connect ECONNREFUSED 127.0.0.1:8545 (injected before sending)");
    const hash = await wallet.writeContract(args);
    sent.push(hash);
    if (fault === "lose_answer") throw new Error("socket hang up (injected after sending)");
    return hash;
  }) as SettlerWalletClient["writeContract"];
  return { account: wallet.account, chain: wallet.chain, writeContract, sent };
}
