import type { Db } from "../db/db";

/** An embedded wallet as stored: addresses lower-case, the server-held owner key encrypted (./wallet-keys.ts). */
export interface WalletRecord {
  accountId: string;
  address: string;
  ownerKind: "siwe" | "server";
  ownerAddress: string;
  /** AES-256-GCM of the owner key, for a server-owned wallet; null for a SIWE one. */
  encryptedOwnerKey: Buffer | null;
  createdAtMs: number;
}

/** The `embedded_wallets` table: one wallet per account, never replaced once stored. */
export interface WalletsStore {
  get(accountId: string): WalletRecord | undefined;
  /** Every wallet, oldest first. */
  list(): WalletRecord[];
  /** Stores the account's wallet unless it has one already (then the stored one stays). */
  insertIfAbsent(wallet: WalletRecord): void;
}

type Row = {
  account_id: string;
  address: string;
  owner_kind: "siwe" | "server";
  owner_address: string;
  encrypted_owner_key: Buffer | null;
  created_at: bigint | number;
};

const toRecord = (row: Row): WalletRecord => ({
  accountId: row.account_id,
  address: row.address,
  ownerKind: row.owner_kind,
  ownerAddress: row.owner_address,
  encryptedOwnerKey: row.encrypted_owner_key,
  createdAtMs: Number(row.created_at),
});

/** WalletsStore on the gateway's SQLite database. Statements are prepared on use: a store is built per operation. */
export class SqliteWalletsStore implements WalletsStore {
  constructor(private readonly db: Db) {}

  get(accountId: string): WalletRecord | undefined {
    const row = this.db.prepare("SELECT * FROM embedded_wallets WHERE account_id = ?").get(accountId) as Row | undefined;
    return row && toRecord(row);
  }

  list(): WalletRecord[] {
    return (this.db.prepare("SELECT * FROM embedded_wallets ORDER BY created_at, account_id").all() as Row[]).map(toRecord);
  }

  insertIfAbsent(w: WalletRecord): void {
    this.db
      .prepare(
        `INSERT INTO embedded_wallets (account_id, address, owner_kind, owner_address, encrypted_owner_key, created_at)
         VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account_id) DO NOTHING`,
      )
      .run(w.accountId, w.address, w.ownerKind, w.ownerAddress, w.encryptedOwnerKey, w.createdAtMs);
  }
}
