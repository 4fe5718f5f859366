import { expect } from "chai";
import hre from "hardhat";
import type { Address } from "viem";
import { CARD_SIGNATURE_HEADER, signNotification } from "../../server/payments/card-provider";
import type { SandboxCardProvider } from "../../server/payments/sandbox-card";
import { linkAddress } from "../../server/settlement/addresses";
import { type LocalChain, USDC, gatewayChain, startLocalChain } from "../helpers/chain";
import { type TestStack, startStack } from "../helpers/gateway";
import { type TestSession, send, signedIn } from "../helpers/session";

/**
 * Card top-ups through the sandbox provider, on Hardhat's in-process chain: a paid checkout ends as an
 * escrow deposit for the account's address, credited to the ledger by the deposit indexer, once.
 */
describe("card top-ups (/v1/topups/card, sandbox provider)", function () {
  this.timeout(60_000);
  let chain: LocalChain;
  let snapshot: string;
  let stack: TestStack;
  let ada: TestSession;
  let accounts = 0;
  /** A fresh address per test, so escrow balances start at zero. */
  let address: Address;

  const provider = () => stack.gw.cardTopups.provider as SandboxCardProvider;
  const notify = (body: string, signature?: string) =>
    send(`${stack.url}/v1/topups/card/notify`, "POST", signature === undefined ? {} : { [CARD_SIGNATURE_HEADER]: signature }, body);
  const deposits = (accountId: string) =>
    stack.gw.ledger.db.value<bigint>(
      "SELECT COUNT(*) FROM entries e JOIN postings p ON p.entry_id = e.id WHERE e.kind = 'deposit' AND p.bucket = 'available' AND p.account_id = ?",
      [accountId],
    );
  const checkouts = () => stack.gw.ledger.db.value<bigint>("SELECT COUNT(*) FROM card_checkouts");

  before(async () => {
    chain = await startLocalChain();
    snapshot = await chain.snapshot();
  });
  after(async () => {
    await chain.revert(snapshot);
  });

  beforeEach(async () => {
    // The deployer owns TestUSDC: on the local chain it is the funding wallet that mints test USDC.
    const [deployer] = await hre.viem.getWalletClients();
    stack = await startStack({ gateway: { chain: { ...(await gatewayChain(chain)), fundingWallet: deployer } } });
    ada = await signedIn(stack, `ada${++accounts}@example.com`);
    address = `0x${"ca".repeat(19)}${accounts.toString(16).padStart(2, "0")}` as Address;
    expect((await linkAddress(stack.gw.ledger, { accountId: ada.accountId, address })).ok).to.equal(true);
  });
  afterEach(async () => {
    await stack.close();
  });

  it("funds a paid checkout: the escrow balance of the account's address rises by the amount, and the ledger is credited once", async () => {
    const paid = await ada.request("POST", "/v1/topups/card", { amount: "10.00", card: "4242 4242 4242 4242" });
    expect(paid.status).to.equal(201);
    expect(paid.body.data).to.include({
      status: "funded",
      amount: 10,
      address: address.toLowerCase(),
      decline_code: null,
      credited: false,
    });
    expect(paid.body.data.deposit_tx).to.match(/^0x[0-9a-f]{64}$/);
    expect(await chain.escrowBalance(address)).to.equal(10n * USDC);

    // The credit is the indexer's, from the Deposited event: the card flow itself wrote none.
    expect(await stack.available(ada.accountId)).to.equal(0n);
    await stack.gw.moneyPath!.indexer.poll();
    expect(await stack.available(ada.accountId)).to.equal(10n * USDC);
    expect(await deposits(ada.accountId)).to.equal(1n);

    const read = await ada.request("GET", `/v1/topups/card/${paid.body.data.id}`);
    expect(read.status).to.equal(200);
    expect(read.body.data).to.include({ id: paid.body.data.id, status: "funded", credited: true });

    // History names it once as a card top-up (its type), and says how the money came (its description).
    const [item] = (await ada.request("GET", "/v1/history")).body.data.items;
    expect(item).to.include({ type: "card_topup", amount: 10, description: "Paid by card, deposited to the escrow", status: "credited" });
  });

  for (const [card, declineCode] of [
    ["4000000000000002", "card_declined"],
    ["4000000000009995", "insufficient_funds"],
  ] as const) {
    it(`credits nothing when the card is declined (${declineCode})`, async () => {
      const declined = await ada.request("POST", "/v1/topups/card", { amount: "10.00", card });
      expect(declined.status).to.equal(201);
      expect(declined.body.data).to.include({ status: "declined", decline_code: declineCode, mint_tx: null, deposit_tx: null });
      await stack.gw.moneyPath!.indexer.poll();
      expect(await chain.escrowBalance(address)).to.equal(0n);
      expect(await stack.available(ada.accountId)).to.equal(0n);

      // The declined attempt leaves a trace in the history, of no amount: the ledger moved nothing for it.
      const history = await ada.request("GET", "/v1/history");
      expect(history.body.data.items).to.deep.equal([
        {
          type: "card_topup",
          amount: 0,
          amount_base_units: "0",
          description: `$10.00 declined (${declineCode.replace(/_/g, " ")}): nothing was charged`,
          status: "declined",
          tx_hash: null,
          created_at: declined.body.data.created_at,
        },
      ]);
      expect(
        await stack.gw.ledger.db.value<bigint>(
          "SELECT COUNT(*) FROM entries e JOIN postings p ON p.entry_id = e.id WHERE p.account_id = ?",
          [ada.accountId],
        ),
      ).to.equal(0n);
    });
  }

  it("refuses an amount below the escrow's minimum deposit with 400, opening no checkout", async () => {
    const below = await ada.request("POST", "/v1/topups/card", { amount: "0.99", card: "4242424242424242" });
    expect(below.status).to.equal(400);
    expect(below.body).to.include({ success: false, code: "amount_below_minimum" });
    expect(below.body.error).to.equal("The minimum deposit is $1.00.");
    expect(await checkouts()).to.equal(0n);
    expect(provider().deliveries).to.have.length(0);
    expect(await chain.escrowBalance(address)).to.equal(0n);
  });

  it("credits a repeated provider notification once", async () => {
    const paid = await ada.request("POST", "/v1/topups/card", { amount: "5.00", card: "4242424242424242" });
    expect(paid.body.data.status).to.equal("funded");
    const [delivery] = provider().deliveries;
    // The provider redelivers the same signed notification, several times at once.
    const replies = await Promise.all([1, 2, 3].map(() => notify(delivery.body, delivery.signature)));
    for (const reply of replies) {
      expect(reply.status).to.equal(200);
      expect(reply.body.data).to.deep.equal({ received: true, duplicate: true, status: "funded" });
    }
    await stack.gw.moneyPath!.indexer.poll();
    expect(await chain.escrowBalance(address)).to.equal(5n * USDC);
    expect(await stack.available(ada.accountId)).to.equal(5n * USDC);
    expect(await deposits(ada.accountId)).to.equal(1n);
  });

  it("answers 401 to a notification with a bad or missing signature, and changes nothing", async () => {
    const open = await ada.request("POST", "/v1/topups/card", { amount: "10.00" });
    expect(open.status).to.equal(201);
    expect(open.body.data.status).to.equal("created");
    expect(open.body.data.next).to.deep.equal({ kind: "card_entry" });
    const body = JSON.stringify({
      eventId: "evt_forged",
      checkoutId: open.body.data.id,
      outcome: "paid",
      amountMicros: "10000000",
      createdAtSec: Math.floor(Date.now() / 1000),
    });

    for (const signature of [undefined, signNotification(Buffer.alloc(32, 7), body), `t=1,v1=${"0".repeat(64)}`]) {
      const reply = await notify(body, signature);
      expect(reply.status).to.equal(401);
      expect(reply.body).to.include({ success: false, code: "invalid_signature" });
    }
    // A genuine signature over another body does not carry over to this one.
    await ada.request("POST", "/v1/topups/card", { amount: "1.00", card: "4000000000000002" });
    expect((await notify(body, provider().deliveries[0].signature)).status).to.equal(401);

    expect((await ada.request("GET", `/v1/topups/card/${open.body.data.id}`)).body.data.status).to.equal("created");
    await stack.gw.moneyPath!.indexer.poll();
    expect(await chain.escrowBalance(address)).to.equal(0n);
    expect(await stack.available(ada.accountId)).to.equal(0n);
  });

  it("counts an unpaid checkout as abandoned once it lapses, and funds nothing for it", async () => {
    const open = await ada.request("POST", "/v1/topups/card", { amount: "10.00" });
    await stack.gw.ledger.db.run("UPDATE card_checkouts SET expires_at = ? WHERE id = ?", [Date.now() - 1, open.body.data.id]);
    const read = await ada.request("GET", `/v1/topups/card/${open.body.data.id}`);
    expect(read.body.data.status).to.equal("abandoned");
    // The card arrives too late: the checkout is no longer 'created', so nothing moves.
    await provider().submitCard(open.body.data.id, "4242424242424242");
    expect((await ada.request("GET", `/v1/topups/card/${open.body.data.id}`)).body.data).to.include({
      status: "abandoned",
      deposit_tx: null,
    });
    expect(await chain.escrowBalance(address)).to.equal(0n);
  });

  it("needs a session and its CSRF token, a linked address, a valid card number, and keeps other accounts' checkouts hidden", async () => {
    expect((await send(`${stack.url}/v1/topups/card`, "POST", {}, { amount: "10.00" })).status).to.equal(401);
    const forged = await ada.request("POST", "/v1/topups/card", { amount: "10.00", card: "4242424242424242" }, { csrf: false });
    expect(forged.status).to.equal(403);

    const invalid = await ada.request("POST", "/v1/topups/card", { amount: "10.00", card: "4111111111111112" });
    expect(invalid.status).to.equal(400);
    expect(invalid.body.code).to.equal("invalid_request");
    for (const amount of ["10.001", 10, "-1", "0"]) {
      expect((await ada.request("POST", "/v1/topups/card", { amount, card: "4242424242424242" })).status).to.equal(400);
    }

    const bob = await signedIn(stack, `bob${accounts}@example.com`);
    const unlinked = await bob.request("POST", "/v1/topups/card", { amount: "10.00", card: "4242424242424242" });
    expect(unlinked.status).to.equal(409);
    expect(unlinked.body.code).to.equal("no_deposit_address");

    const mine = await ada.request("POST", "/v1/topups/card", { amount: "2.00" });
    expect((await bob.request("GET", `/v1/topups/card/${mine.body.data.id}`)).status).to.equal(404);
    expect(await chain.escrowBalance(address)).to.equal(0n);
  });
});

describe("card top-ups without a funding wallet", () => {
  it("answers 503 chain_not_configured", async () => {
    const stack = await startStack();
    try {
      const ada = await signedIn(stack, "ada@example.com");
      const reply = await ada.request("POST", "/v1/topups/card", { amount: "10.00", card: "4242424242424242" });
      expect(reply.status).to.equal(503);
      expect(reply.body.code).to.equal("chain_not_configured");
    } finally {
      await stack.close();
    }
  });
});
