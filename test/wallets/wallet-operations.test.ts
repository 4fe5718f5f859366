import { expect } from "chai";
import type { Database } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { WalletsStore } from "../../server/wallets/wallets-store";
import { WALLET_OPERATIONS, type WalletOperation, underWalletLock, walletFor } from "../../server/wallets/wallet-operations";
import { withWalletLock } from "../../server/wallets/wallets";
import { GroupCommit } from "../../server/db/group-commit";
import { openDatabase } from "../../server/db/db";
import { SqliteDatabase } from "../../server/db/sqlite-database";
import { SCHEMA } from "../../server/schema";

describe("wallet operations (server/wallets/wallet-operations.ts): operations × kinds of owner, one guard", () => {
  let db: Database;
  const address = { server: `0x${"a1".repeat(20)}`, siwe: `0x${"b2".repeat(20)}` } as const;

  before(async () => {
    const sqlite = openDatabase(":memory:", SCHEMA);
    db = new SqliteDatabase(sqlite, new GroupCommit(sqlite));
    const ledger = await Ledger.open(db);
    const store = new WalletsStore(db);
    for (const kind of ["server", "siwe"] as const) {
      await ledger.ensureAccount({ id: kind, kind: "user", name: kind });
      await store.insertIfAbsent({
        accountId: kind,
        address: address[kind],
        ownerKind: kind,
        ownerAddress: `0x${"ee".repeat(20)}`,
        encryptedOwnerKey: kind === "server" ? Buffer.from([1]) : null,
        createdAtMs: 1,
      });
    }
    await ledger.ensureAccount({ id: "walletless", kind: "user", name: "walletless" });
  });
  after(() => db.close());

  for (const operation of Object.keys(WALLET_OPERATIONS) as WalletOperation[]) {
    const rules = WALLET_OPERATIONS[operation];
    describe(operation, () => {
      it("refuses an account without a wallet with no_wallet, whichever flow it asks for", async () => {
        for (const flow of ["server", "siwe"] as const)
          expect(await walletFor(db, "walletless", operation, flow)).to.include({ ok: false, code: "no_wallet" });
      });

      it(`gives each kind of owner its own flow and refuses the other one with ${rules.wrongFlow}, saying which path is its own`, async () => {
        for (const kind of ["server", "siwe"] as const) {
          const own = await walletFor(db, kind, operation, kind);
          expect(own.ok && own.wallet.address.toLowerCase()).to.equal(address[kind]);
          const other = await walletFor(db, kind, operation, kind === "server" ? "siwe" : "server");
          expect(other).to.include({ ok: false, code: rules.wrongFlow, message: rules.useYourFlow[kind] });
        }
      });

      it("puts its precheck's refusal between no_wallet and the flow", async () => {
        const refused = await walletFor(db, "siwe", operation, "server", async () => ({
          ok: false as const,
          code: "payout_address_not_wallet" as const,
          message: "not paid there",
        }));
        expect(refused).to.include({ code: "payout_address_not_wallet" });
      });

      it(`answers ${rules.inProgress} while another operation of the wallet holds its lock, and runs once it is free`, async () => {
        const own = await walletFor(db, "server", operation, "server");
        if (!own.ok) throw new Error(own.message);
        let inner: unknown;
        await withWalletLock(own.wallet.address, async () => {
          inner = await underWalletLock(own.wallet, operation, async () => "ran");
        });
        expect(inner).to.include({ ok: false, code: rules.inProgress });
        expect(await underWalletLock(own.wallet, operation, async () => "ran")).to.equal("ran");
      });
    });
  }
});
