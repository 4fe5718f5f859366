import { expect } from "chai";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { type AaStack, gatewayOptionsFor, startAaStack } from "../helpers/aa-stack";
import { type TestStack, startStack } from "../helpers/gateway";

/**
 * A SIWE user's embedded wallet is owned by the user's own address, so the gateway cannot sweep it: it prepares
 * the sponsored UserOperation, the owner signs its hash (personal_sign), the gateway submits it through the real
 * Alto bundler, and the deposit indexer credits the escrow deposit. On a real `hardhat node`.
 */
describe("a SIWE wallet's sweep: prepare, sign, submit", function () {
  this.timeout(120_000);
  let aa: AaStack;
  let stack: TestStack;

  before(async () => {
    aa = await startAaStack();
    stack = await startStack({
      buyerUsd: "0",
      gateway: gatewayOptionsFor(aa),
    });
  });
  after(async () => {
    await stack?.close();
    await aa?.stop();
  });

  /** An account signed in with `provider`, its wallet, and a session's cookie and CSRF token. */
  async function signedIn(provider: "siwe" | "email", subject: string) {
    const signIn = await stack.gw.sessions.signIn(provider, subject);
    if (!signIn.ok) throw new Error(signIn.reason);
    const wallet = await stack.gw.wallets!.ensureFor(signIn.accountId);
    const { token, csrfToken } = await stack.gw.sessions.issue(signIn.accountId);
    const headers = { cookie: `sg_session=${token}`, "x-csrf-token": csrfToken, "content-type": "application/json" };
    const post = async (pathname: string, body?: unknown) => {
      const response = await fetch(`${stack.url}${pathname}`, {
        method: "POST",
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    const me = async () => (await (await fetch(`${stack.url}/v1/me`, { headers })).json()) as any;
    return { accountId: signIn.accountId, wallet, post, me, headers };
  }

  it("moves the wallet's USDC into the escrow with the owner's signature; a wrong signature is refused and the operation stays usable", async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const user = await signedIn("siwe", owner.address);
    expect(user.wallet.ownerKind).to.equal("siwe");
    expect(user.wallet.ownerAddress).to.equal(owner.address);

    // Needs the CSRF token.
    const noCsrf = await fetch(`${stack.url}/v1/wallet/sweep/prepare`, { method: "POST", headers: { cookie: user.headers.cookie } });
    expect(noCsrf.status).to.equal(403);

    // Empty, then below the minimum: nothing is prepared.
    const empty = await user.post("/v1/wallet/sweep/prepare");
    expect(empty.status).to.equal(400);
    expect(empty.body.code).to.equal("amount_below_minimum");
    await aa.mint(user.wallet.address, 400_000n);
    expect((await user.post("/v1/wallet/sweep/prepare")).status).to.equal(400);
    await aa.mint(user.wallet.address, 2_100_000n);

    // The server-owned sweep loop leaves a SIWE wallet alone.
    expect(await stack.gw.wallets!.sweepAll()).to.equal(0);

    const prepared = await user.post("/v1/wallet/sweep/prepare");
    expect(prepared.status).to.equal(201);
    const hash = prepared.body.data.user_op_hash as Hex;
    expect(hash).to.match(/^0x[0-9a-f]{64}$/);
    expect(prepared.body.data.amount).to.equal(2.5);
    expect(Date.parse(prepared.body.data.expires_at)).to.be.greaterThan(Date.now());

    // Unknown hash, another account's hash: 404.
    const unknown = await user.post("/v1/wallet/sweep/submit", {
      user_op_hash: `0x${"ab".repeat(32)}`,
      signature: await owner.signMessage({ message: { raw: `0x${"ab".repeat(32)}` as Hex } }),
    });
    expect(unknown.status).to.equal(404);
    const stranger = await signedIn("siwe", privateKeyToAccount(generatePrivateKey()).address);
    expect(
      (
        await stranger.post("/v1/wallet/sweep/submit", {
          user_op_hash: hash,
          signature: await owner.signMessage({ message: { raw: hash } }),
        })
      ).status,
    ).to.equal(404);

    // Someone else's signature: the bundler refuses it, 400, and the prepared operation is still there.
    const intruder = privateKeyToAccount(generatePrivateKey());
    const wrong = await user.post("/v1/wallet/sweep/submit", {
      user_op_hash: hash,
      signature: await intruder.signMessage({ message: { raw: hash } }),
    });
    expect(wrong.status).to.equal(400);
    expect(wrong.body.code).to.equal("user_operation_rejected");

    // The owner's personal_sign of the hash: mined, and credited by the indexer from the escrow event.
    const submitted = await user.post("/v1/wallet/sweep/submit", {
      user_op_hash: hash,
      signature: await owner.signMessage({ message: { raw: hash } }),
    });
    expect(submitted.status, JSON.stringify(submitted.body)).to.equal(200);
    expect(submitted.body.data.amount).to.equal(2.5);
    expect(submitted.body.data.transaction_hash).to.match(/^0x[0-9a-f]{64}$/);
    expect((await user.me()).data.balance).to.deep.include({ available: 0 }); // not credited by the submit itself
    await stack.gw.moneyPath!.indexer.poll();
    await stack.gw.moneyPath!.indexer.poll();
    expect((await user.me()).data.balance).to.deep.include({ available: 2.5 });

    // Spent: the same hash again is unknown, and the wallet is empty.
    expect(
      (await user.post("/v1/wallet/sweep/submit", { user_op_hash: hash, signature: await owner.signMessage({ message: { raw: hash } }) }))
        .status,
    ).to.equal(404);
    expect((await user.post("/v1/wallet/sweep/prepare")).status).to.equal(400);
    await stack.gw.moneyPath!.indexer.poll();
    expect((await user.me()).data.balance).to.deep.include({ available: 2.5 });
  });

  it("answers 409 for a server-owned wallet, which is swept automatically", async () => {
    const user = await signedIn("email", "server-owned@example.com");
    expect(user.wallet.ownerKind).to.equal("server");
    await aa.mint(user.wallet.address, 2_000_000n);
    const prepared = await user.post("/v1/wallet/sweep/prepare");
    expect(prepared.status).to.equal(409);
    expect(prepared.body.code).to.equal("wallet_swept_automatically");
  });
});
