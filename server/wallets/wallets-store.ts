import type { Database, Sql } from "../db/sql";

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

/** The `embedded_wallets` table, on either engine: one wallet per account, never replaced once stored. */
export class WalletsStore {
  constructor(private readonly db: Database) {}

  async get(accountId: string, sql: Sql = this.db): Promise<WalletRecord | undefined> {
    const row = await sql.one<Row>("SELECT * FROM embedded_wallets WHERE account_id = ?", [accountId]);
    return row && toRecord(row);
  }

  /** Every wallet, oldest first. */
  async list(): Promise<WalletRecord[]> {
    return (await this.db.all<Row>("SELECT * FROM embedded_wallets ORDER BY created_at, account_id")).map(toRecord);
  }

  /** Stores the account's wallet unless it has one already (then the stored one stays). */
  async insertIfAbsent(w: WalletRecord, tx?: Sql): Promise<void> {
    await (tx ?? this.db).run(
      `INSERT INTO embedded_wallets (account_id, address, owner_kind, owner_address, encrypted_owner_key, created_at)
       VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account_id) DO NOTHING`,
      [w.accountId, w.address, w.ownerKind, w.ownerAddress, w.encryptedOwnerKey, w.createdAtMs],
    );
  }
}
