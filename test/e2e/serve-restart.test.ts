import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { expect } from "chai";
import { loadServeConfig } from "../../server/config";
import { check, refusalLine } from "../../server/main";
import { type Address, getAddress, parseAbi } from "viem";
import { generatePrivateKey } from "viem/accounts";
import { writeDeployment } from "../../server/devstack/deploy";
import { DEV_ACCOUNT_INDEX } from "../../server/devstack/local-node";
import { type AaStack, devPrivateKey, startAaStack } from "../helpers/aa-stack";
import { type TestBackend, startTestBackend } from "../helpers/backend";
import { type ServeProcess, startServe } from "../helpers/serve-process";

const USDC = 1_000_000n;
const ROOT = path.join(__dirname, "../..");
const run = promisify(execFile);
const ESCROW_ABI = parseAbi(["function balances(address) view returns (uint256)", "function earnings(address) view returns (uint256)"]);

/** Resolves with `read()`'s value once `done` holds for it, polling every 200 ms; rejects after `timeoutMs`. */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last saw ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A signed-in browser: its cookies and CSRF token. */
interface Browser {
  cookie: string;
  csrf: string;
}

describe("npm run serve on the same ledger and chain, stopped and started again", function () {
  this.timeout(300_000);
  let stack: AaStack;
  let backend: TestBackend;
  let dir: string;
  let dbPath: string;
  let settings: Record<string, string>;
  const running: ServeProcess[] = [];

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-serve-"));
    dbPath = path.join(dir, "data", "gateway.db");
    stack = await startAaStack();
    backend = await startTestBackend();
    const deploymentFile = path.join(dir, "deployment.json");
    // The file an operator keeps: the escrow's deployment and the ERC-4337 contracts on the same chain.
    writeDeployment(deploymentFile, { ...stack.deployment, accountAbstraction: stack.aa });
    settings = {
      CHAIN_RPC_URL: stack.node.rpcUrl,
      DEPLOYMENT_FILE: deploymentFile,
      DB_PATH: dbPath,
      PORT: "0",
      SETTLER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.settler),
      VOUCHER_SIGNER_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.voucherSigner),
      BUNDLER_URL: stack.bundler.url,
      PAYMASTER_SIGNER_PRIVATE_KEY: stack.paymasterSignerPrivateKey,
      WALLET_ENCRYPTION_KEY: "42".repeat(32),
      FUNDING_PRIVATE_KEY: devPrivateKey(DEV_ACCOUNT_INDEX.deployer),
      SKILL_BACKEND_ALLOWLIST: backend.url,
      // The local chain does not reorg; and the loops run fast enough for a test.
      DEPOSIT_CONFIRMATIONS: "0",
      INDEXER_INTERVAL_MS: "200",
      WALLET_SWEEP_INTERVAL_MS: "1000",
    };
  });
  after(async () => {
    for (const serve of running) await serve.stop("SIGKILL").catch(() => {});
    await backend?.close();
    await stack?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const start = async (extra: Record<string, string> = {}) => {
    const serve = await startServe({ ...settings, ...extra });
    running.push(serve);
    return serve;
  };

  // Through serve's own check in this process (test/e2e/serve-refusals.test.ts runs it as the process too): each
  // run of npm run serve would cost about 3 s of CPU to load the gateway.
  const refusalFor = async (env: Record<string, string>) => {
    try {
      await check(loadServeConfig(env));
      return "(started)";
    } catch (error) {
      return refusalLine(error) ?? `(failed: ${(error as Error).message})`;
    }
  };

  it("refuses a paymaster key that is not the paymaster's signer, a bundler URL where no bundler answers, and a paymaster that is another contract", async () => {
    expect(await refusalFor({ ...settings, PAYMASTER_SIGNER_PRIVATE_KEY: generatePrivateKey() })).to.match(
      /^npm run serve refused to start: PAYMASTER_SIGNER_PRIVATE_KEY is the key of 0x[0-9a-fA-F]{40}, but the deployment file's paymasterSigner is 0x[0-9a-fA-F]{40}$/,
    );
    // The chain's own RPC is no bundler: it knows no eth_supportedEntryPoints.
    expect(await refusalFor({ ...settings, BUNDLER_URL: stack.node.rpcUrl })).to.match(
      /^npm run serve refused to start: BUNDLER_URL http:\/\/127\.0\.0\.1:\d+: the bundler did not answer eth_supportedEntryPoints \(.+\)$/,
    );
    // A deployment file whose paymaster is another contract (here the escrow).
    const otherPaymaster = path.join(dir, "other-paymaster.json");
    writeDeployment(otherPaymaster, { ...stack.deployment, accountAbstraction: { ...stack.aa, paymaster: stack.deployment.escrow } });
    expect(await refusalFor({ ...settings, DEPLOYMENT_FILE: otherPaymaster })).to.match(
      /^npm run serve refused to start: DEPLOYMENT_FILE \S+other-paymaster\.json's accountAbstraction does not match the chain: the paymaster 0x[0-9a-fA-F]{40} does not answer token\(\) as a GatewayPaymaster \(.+\)$/,
    );
    expect(fs.existsSync(dbPath)).to.equal(false);
  });

  it("keeps balances, keys, skills, sessions and the calls waiting for settlement, settles them after the restart, and still takes calls", async () => {
    // --- The first run: nothing settles (a day between batches), so every paid call is still pending at the stop.
    let serve = await start({ SETTLE_INTERVAL_MS: "86400000" });
    expect(serve.output()).to.match(/^Embedded wallets: on \(bundler /m);
    expect(serve.output()).to.not.include(settings.SETTLER_PRIVATE_KEY.slice(2));
    let url = serve.url;
    const origin = () => new URL(url).origin;

    /** Signs a person up by e-mail, the link read from the outbox table as docs/accounts.md says. */
    const signUp = async (email: string): Promise<Browser> => {
      const started = await fetch(`${url}/auth/email/start`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: origin() },
        body: JSON.stringify({ email }),
      });
      expect(started.status).to.equal(200);
      const mail = await eventually(
        async () => {
          const db = new Database(dbPath, { readonly: true });
          try {
            return db.prepare("SELECT body FROM outbox WHERE to_address = ? ORDER BY id DESC LIMIT 1").pluck().get(email) as
              string | undefined;
          } finally {
            db.close();
          }
        },
        (body) => body !== undefined,
        `the sign-in mail to ${email}`,
        10_000,
      );
      const token = /token=([A-Za-z0-9_-]+)/.exec(mail!)![1];
      const verified = await fetch(`${url}/auth/email/verify`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: origin() },
        body: JSON.stringify({ token }),
      });
      expect(verified.status).to.equal(200);
      const cookies = verified.headers.getSetCookie().map((c) => c.split(";")[0]);
      return { cookie: cookies.join("; "), csrf: cookies.find((c) => c.startsWith("sg_csrf="))!.slice("sg_csrf=".length) };
    };
    const asBrowser = async (browser: Browser, method: string, route: string, body?: unknown) => {
      const res = await fetch(`${url}${route}`, {
        method,
        headers: { cookie: browser.cookie, "x-csrf-token": browser.csrf, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const withKey = async (key: string, method: string, route: string, body?: unknown) => {
      const res = await fetch(`${url}${route}`, {
        method,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const onChain = (functionName: "balances" | "earnings", account: Address) =>
      stack.node.publicClient.readContract({ address: stack.deployment.escrow, abi: ESCROW_ABI, functionName, args: [account] });

    // A buyer signs up and gets an embedded wallet from the configured bundler's stack; USDC sent to it is
    // swept into the escrow by a sponsored UserOperation and credited by the deposit indexer.
    const buyer = await signUp("buyer@example.com");
    const buyerWallet = getAddress((await asBrowser(buyer, "GET", "/v1/me")).body.data.wallet.address);
    await stack.mint(buyerWallet, 3n * USDC);
    await eventually(
      async () => (await asBrowser(buyer, "GET", "/v1/me")).body.data.balance.available,
      (available) => available === 3,
      "the buyer's 3 USDC to be swept and credited",
    );
    const created = await asBrowser(buyer, "POST", "/v1/keys", { name: "agent", scopes: ["calls", "usage:read"] });
    expect(created.status).to.equal(201);
    const key: string = created.body.data.key;

    // A seller signs up, and the operator registers a skill of theirs with `npm run register-skill` beside the running
    // gateway: the test backend is on loopback, allowlisted for the operator's skills only (a seller's own listing
    // must name a public backend, which no test can run).
    const seller = await signUp("seller@example.com");
    const me = (await asBrowser(seller, "GET", "/v1/me")).body.data;
    const sellerWallet = getAddress(me.wallet.address);
    const spec = path.join(dir, "echo-serve.json");
    fs.writeFileSync(
      spec,
      JSON.stringify({ slug: "echo-serve", name: "Echo", price: "0.01", seller: me.account_id, backend_url: `${backend.url}/echo` }),
    );
    const registered = await run(
      process.execPath,
      ["-r", "ts-node/register/transpile-only", path.join(ROOT, "scripts/register-skill.ts"), spec],
      {
        cwd: ROOT,
        env: { ...process.env, DB_PATH: dbPath, DATABASE_URL: "", SKILL_BACKEND_ALLOWLIST: backend.url },
      },
    );
    expect(registered.stdout).to.match(/^skill: +echo-serve /m);
    await eventually(
      async () => (await fetch(`${url}/v1/skills/echo-serve`)).status,
      (status) => status === 200,
      "the running gateway to list the registered skill",
      10_000,
    );

    for (let i = 0; i < 3; i++) {
      const call = await withKey(key, "POST", "/v1/call", { skill_id: "echo-serve", input: { n: i } });
      expect(call.status, JSON.stringify(call.body)).to.equal(200);
      expect(call.body.metadata.price_paid).to.equal(0.01);
    }
    expect((await withKey(key, "GET", "/v1/balance")).body.data).to.include({ available: 2.97, held: 0 });
    expect((await asBrowser(seller, "GET", "/v1/earnings")).body.data).to.include({ pending: 0.027, settled: 0 });

    // --- Stopped with SIGTERM: it drains and exits 0, leaving its ledger with the three calls unsettled.
    expect(await serve.stop("SIGTERM")).to.deep.equal({ code: 0, signal: null });
    const db = new Database(dbPath, { readonly: true });
    try {
      expect(db.prepare("SELECT COUNT(*) FROM holds WHERE status = 'captured' AND batch_number IS NULL").pluck().get()).to.equal(3);
      expect(db.prepare("SELECT COUNT(*) FROM settlement_batches").pluck().get()).to.equal(0);
    } finally {
      db.close();
    }
    expect(await onChain("balances", buyerWallet)).to.equal(3n * USDC);
    expect(fs.existsSync(`${dbPath}.lock`)).to.equal(false);

    // --- Started again on the same database and chain, settling every half second now.
    serve = await start({ SETTLE_INTERVAL_MS: "500" });
    url = serve.url;
    expect(serve.output()).to.not.match(/^Recovered:/m);

    // The key still works and the balance is what it was; the skill is listed; the sessions are open.
    expect((await withKey(key, "GET", "/v1/balance")).body.data).to.include({ available: 2.97, held: 0 });
    const skills = await fetch(`${url}/v1/skills`).then((res) => res.json() as Promise<any>);
    expect(skills.data.map((s: { slug: string }) => s.slug)).to.include("echo-serve");
    expect((await asBrowser(buyer, "GET", "/v1/me")).status).to.equal(200);

    // The calls that were waiting settle on-chain, once: the buyer pays 0.03, the seller earns 90% of it.
    await eventually(
      async () => (await asBrowser(seller, "GET", "/v1/earnings")).body.data,
      (earnings) => earnings.pending === 0 && earnings.settled === 0.027,
      "the pending calls to settle after the restart",
    );
    expect(await onChain("balances", buyerWallet)).to.equal(2_970_000n);
    expect(await onChain("earnings", sellerWallet)).to.equal(27_000n);

    // And a call still works.
    const call = await withKey(key, "POST", "/v1/call", { skill_id: "echo-serve", input: { after: "restart" } });
    expect(call.status, JSON.stringify(call.body)).to.equal(200);
    expect(call.body.data).to.deep.equal({ after: "restart" });
    expect((await withKey(key, "GET", "/v1/balance")).body.data).to.include({ available: 2.96 });
    expect(await serve.stop("SIGTERM")).to.deep.equal({ code: 0, signal: null });
  });
});
