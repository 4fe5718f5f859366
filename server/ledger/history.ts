import type { Sql } from "../db/sql";
import { usdDisplay } from "./money";

/** One movement of an account's money, as the dashboard's Wallet page lists it. */
export interface HistoryItem {
  type: "deposit" | "card_topup" | "charge" | "withdrawal" | "exit";
  /** Signed: money in is positive, money out negative. Base units. */
  amountMicros: bigint;
  description: string;
  /**
   * deposit and card_topup: credited; card_topup that moved no money: declined | abandoned; charge: unsettled | pending |
   * settled; withdrawal: issued | redeemed | returned; exit: its status.
   */
  status: string;
  txHash: string | null;
  createdAtMs: number;
}

export interface HistoryParameters {
  limit: number;
  /** Only items older than this (ms): pass the last item's time to read the next page. */
  beforeMs?: number;
}

/**
 * An account's deposits (on-chain and by card), charges and withdrawals (vouchers and exits),
 * newest first, and the card top-ups that moved no money (declined, or abandoned unpaid), so that
 * a person who tried one finds a trace of it; those come from the checkouts' table, not the
 * ledger, and show an amount of 0. Each kind lives in its own table, each indexed by account and
 * time, so this reads the newest `limit` of each and merges them: at most 5 × limit rows for one page.
 * Items with the same millisecond may straddle a page boundary; the page size is a display
 * choice, and no amount depends on it.
 */
export async function accountHistory(db: Sql, accountId: string, p: HistoryParameters): Promise<HistoryItem[]> {
  const before = p.beforeMs ?? Number.MAX_SAFE_INTEGER;
  const items: HistoryItem[] = [];

  const deposits = await db.all<{ tx_hash: string; sender: string; amount: bigint; created_at: bigint; by_card: bigint }>(
    `SELECT d.tx_hash, d.sender, d.amount, d.created_at,
              CASE WHEN EXISTS (SELECT 1 FROM card_checkouts c WHERE c.account_id = d.account_id AND c.deposit_tx = d.tx_hash)
                   THEN 1 ELSE 0 END AS by_card
       FROM chain_deposits d WHERE d.account_id = ? AND d.created_at < ? ORDER BY d.created_at DESC, d.block_number DESC, d.log_index DESC LIMIT ?`,
    [accountId, before, p.limit],
  );
  for (const d of deposits) {
    const byCard = d.by_card === 1n;
    items.push({
      type: byCard ? "card_topup" : "deposit",
      amountMicros: d.amount,
      // The type already says "card top-up": the description says how the money arrived.
      description: byCard ? "Paid by card, deposited to the escrow" : `Deposit from ${d.sender}`,
      status: "credited",
      txHash: d.tx_hash,
      createdAtMs: Number(d.created_at),
    });
  }

  const unpaid = await db.all<{ amount: bigint; status: string; decline_code: string | null; created_at: bigint }>(
    `SELECT amount, status, decline_code, created_at FROM card_checkouts
       WHERE account_id = ? AND status IN ('declined', 'abandoned') AND created_at < ? ORDER BY created_at DESC LIMIT ?`,
    [accountId, before, p.limit],
  );
  for (const c of unpaid) {
    const why = c.decline_code ? ` (${c.decline_code.replace(/_/g, " ")})` : "";
    items.push({
      type: "card_topup",
      amountMicros: 0n,
      description:
        c.status === "declined"
          ? `${usdDisplay(c.amount)} declined${why}: nothing was charged`
          : `${usdDisplay(c.amount)} not paid before the checkout expired: nothing was charged`,
      status: c.status,
      txHash: null,
      createdAtMs: Number(c.created_at),
    });
  }

  const charges = await db.all<{
    charged_micros: bigint;
    created_at: bigint;
    name: string | null;
    slug: string | null;
    batch_status: string | null;
    batch_number: bigint | null;
    tx_hash: string | null;
  }>(
    `SELECT c.charged_micros, c.created_at, s.name, s.slug, b.status AS batch_status, b.number AS batch_number, b.tx_hash
       FROM calls c
       LEFT JOIN skills s ON s.id = c.skill_id
       LEFT JOIN holds h ON h.id = c.hold_id
       LEFT JOIN settlement_batches b ON b.number = h.batch_number
       WHERE c.account_id = ? AND c.created_at < ? AND c.charged_micros > 0
       ORDER BY c.created_at DESC LIMIT ?`,
    [accountId, before, p.limit],
  );
  for (const c of charges) {
    items.push({
      type: "charge",
      amountMicros: -c.charged_micros,
      description:
        c.batch_number === null
          ? `Call to ${c.name ?? c.slug ?? "a removed skill"}`
          : `Call to ${c.name ?? c.slug} (batch ${c.batch_number})`,
      status: c.batch_status ?? "unsettled",
      txHash: c.batch_status === "settled" ? c.tx_hash : null,
      createdAtMs: Number(c.created_at),
    });
  }

  const vouchers = await db.all<{ address: string; nonce: bigint; amount: bigint; status: string; created_at: bigint }>(
    "SELECT address, nonce, amount, status, created_at FROM vouchers WHERE account_id = ? AND created_at < ? ORDER BY created_at DESC LIMIT ?",
    [accountId, before, p.limit],
  );
  for (const v of vouchers) {
    items.push({
      type: "withdrawal",
      // A returned voucher gave its amount back: it moved nothing in the end.
      amountMicros: v.status === "returned" ? 0n : -v.amount,
      description: "Withdrawal",
      status: v.status,
      txHash: null,
      createdAtMs: Number(v.created_at),
    });
  }

  const exits = await db.all<{
    tx_hash: string;
    requested: bigint;
    paid: bigint | null;
    status: string;
    created_at: bigint;
  }>(
    "SELECT tx_hash, requested, paid, status, created_at FROM chain_exits WHERE account_id = ? AND created_at < ? ORDER BY created_at DESC LIMIT ?",
    [accountId, before, p.limit],
  );
  for (const e of exits) {
    items.push({
      type: "exit",
      amountMicros: e.status === "completed" ? -(e.paid ?? 0n) : e.status === "pending" ? -e.requested : 0n,
      description: "Exit requested on the escrow",
      status: e.status,
      txHash: e.tx_hash,
      createdAtMs: Number(e.created_at),
    });
  }

  // A stable sort: items of one millisecond keep each query's order (deposits by chain position).
  return items.sort((a, b) => b.createdAtMs - a.createdAtMs).slice(0, p.limit);
}
