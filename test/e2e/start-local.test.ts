import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";
import { startLocalProcess } from "../../server/devstack/start-local-process";
import { SESSION_COOKIE } from "../../server/http/session-cookies";
import { Browser } from "../helpers/oidc-provider";
import { SHUTDOWN_DEADLINE_MS } from "../../server/ops/shutdown";

/** `npm start` on free ports and a fresh database at `dbPath`, without the shell's OAuth settings. */
const startLocal = (dbPath: string) =>
  startLocalProcess(dbPath, { GITHUB_CLIENT_ID: "", GITHUB_CLIENT_SECRET: "", GOOGLE_CLIENT_ID: "", GOOGLE_CLIENT_SECRET: "" });

/** The process ids below `pid`, read from Linux's /proc (children of each of its threads), depth first. */
function descendantsOf(pid: number): number[] {
  const direct = new Set<number>();
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    const text = fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
    for (const child of text ? text.split(/\s+/) : []) direct.add(Number(child));
  }
  return [...direct].flatMap((child) => [child, ...(isRunning(child) ? descendantsOf(child) : [])]);
}

/** Whether `pid` is a live process: it exists and is not a zombie waiting to be reaped. */
function isRunning(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** Whether nothing listens at the URL's host and port any more: a new server can bind it. */
function portIsFree(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once("error", () => resolve(false));
    probe.listen(Number(port), hostname, () => probe.close(() => resolve(true)));
  });
}

describe("npm start (the embedded default)", () => {
  let dir: string;
  let child: ChildProcess | undefined;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "skill-gw-start-"));
  });
  after(() => {
    child?.kill("SIGKILL");
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("starts a chain, deposits on-chain, prints a key and a curl whose call succeeds with price_paid 0.001, signs new people up with Google and GitHub through the local stand-in, and stops everything on Ctrl-C", async function () {
    this.timeout(120_000);
    const started = await startLocal(path.join(dir, "gateway.db"));
    child = started.child;
    const key = /^API key: (atom_\S+)$/m.exec(started.output)?.[1];
    expect(key, started.output).to.be.a("string");
    const curl = /^curl -s (\S+) -H "Authorization: Bearer (\S+)" -H "Content-Type: application\/json" -d '(.+)'$/m.exec(started.output);
    expect(curl, started.output).to.not.equal(null);
    const [, url, curlKey, body] = curl!;
    expect(curlKey).to.equal(key);

    const res = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${curlKey}`, "content-type": "application/json" },
      body,
    });
    const json: any = await res.json();
    expect(res.status).to.equal(200);
    expect(json.success).to.equal(true);
    expect(json.data).to.deep.equal(JSON.parse(body).input);
    expect(json.metadata).to.include({ skill_id: "echo", price_paid: 0.001 });

    const broken = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ skill_id: "broken", input: {} }),
    });
    expect(broken.status).to.equal(502);
    const balance: any = await (
      await fetch(url.replace("/v1/call", "/v1/balance"), { headers: { authorization: `Bearer ${key}` } })
    ).json();
    expect(balance.data).to.include({ available: 9.999, held: 0 });

    const withdrawal: any = await (
      await fetch(url.replace("/v1/call", "/v1/withdrawals"), {
        method: "POST",
        headers: { authorization: `Bearer ${key}` },
        body: JSON.stringify({ amount: "1" }),
      })
    ).json();
    expect(withdrawal.success, JSON.stringify(withdrawal)).to.equal(true);
    expect(withdrawal.data.voucher.amount).to.equal("1000000");
    expect(withdrawal.data.signature).to.match(/^0x[0-9a-f]{130}$/);

    // The dashboard is where the output says, served as a page with its script.
    const dashboard = /^Dashboard: +(http:\/\/\S+\/)/m.exec(started.output)?.[1];
    expect(dashboard, started.output).to.match(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const page = await fetch(`${dashboard}wallet`);
    expect(page.status).to.equal(200);
    expect(await page.text()).to.include("/assets/app.js");

    const rpcUrl = /^Chain RPC: +(\S+)/m.exec(started.output)?.[1];
    expect(rpcUrl, started.output).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(started.output).to.match(/^Escrow: +0x[0-9a-fA-F]{40}$/m);
    expect(started.output).to.contain("balance 10 USDC, deposited on-chain");
    // npm start writes calls' holds and charges on the ledger writer thread unless told otherwise: the call above went through it.
    expect(started.output).to.match(/^Database: .*calls' ledger writes on a writer thread, SQLITE_LEDGER_WRITER\)$/m);
    const rpc = (method: string) =>
      fetch(rpcUrl!, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
      });
    expect(((await (await rpc("eth_chainId")).json()) as { result: string }).result).to.equal("0x2105");
    // Ready: the ledger commits, the chain answers, the indexer and settler are running.
    const ready: any = await (await fetch(url.replace("/v1/call", "/readyz"))).json();
    expect(ready, JSON.stringify(ready)).to.deep.include({ success: true });
    expect(Object.keys(ready.data.checks)).to.deep.equal(["ledger", "chain", "indexer", "settler"]);

    // Without OAuth apps configured, a local provider stands in for GitHub and Google: a new
    // person signs up through its login and consent pages, as a browser would.
    const signIn =
      /^Sign-in: +(http:\/\/\S+?)\/auth\/github\/start and \/auth\/google\/start \(a local development provider stands in for GitHub and Google\)$/m.exec(
        started.output,
      );
    expect(signIn, started.output).to.not.equal(null);
    const gatewayUrl = signIn![1];
    let providerUrl = "";
    for (const [which, login] of [
      ["google", "ada"],
      ["github", "grace"],
    ] as const) {
      const browser = new Browser();
      const start = await browser.request(`${gatewayUrl}/auth/${which}/start`);
      expect(start.status, await start.clone().text()).to.equal(302);
      providerUrl = new URL(start.headers.get("location")!).origin;
      const callback = await browser.authorize(start.headers.get("location")!, login, (next) => next.startsWith(gatewayUrl));
      expect((await browser.request(callback)).status).to.equal(303);
      expect(browser.cookies(gatewayUrl).has(SESSION_COOKIE)).to.equal(true);
      const me: any = await (await browser.request(`${gatewayUrl}/v1/me`)).json();
      expect(
        me.data.identities.map((i: any) => i.provider),
        JSON.stringify(me),
      ).to.deep.equal([which]);
    }
    expect(providerUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);

    const exited = new Promise<number | null>((resolve) => child!.once("exit", resolve));
    child.kill("SIGINT");
    expect(await exited).to.equal(0);
    child = undefined;
    // Ctrl-C stops the chain too.
    let refused = false;
    await rpc("eth_chainId").catch(() => (refused = true));
    expect(refused, "the chain is still answering").to.equal(true);
    refused = false;
    await fetch(`${providerUrl}/.well-known/openid-configuration`).catch(() => (refused = true));
    expect(refused, "the local identity provider is still answering").to.equal(true);
  });

  it("takes its chain node and bundler with it when it is killed with SIGKILL, and they listen on loopback only", async function () {
    this.timeout(120_000);
    const started = await startLocal(path.join(dir, "killed.db"));
    child = started.child;
    const rpcUrl = /^Chain RPC: +(\S+)/m.exec(started.output)?.[1];
    const bundlerUrl = /^Bundler: +(\S+)/m.exec(started.output)?.[1];
    expect(bundlerUrl, started.output).to.match(/^http:\/\/127\.0\.0\.1:\d+\/rpc$/);
    const answers = (target: string) =>
      fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      }).then(
        () => true,
        () => false,
      );
    expect(await answers(rpcUrl!)).to.equal(true);
    expect(await answers(bundlerUrl!)).to.equal(true);
    // Not reachable on any other address of this machine (Alto itself binds 0.0.0.0).
    const external = Object.values(os.networkInterfaces())
      .flat()
      .find((i) => i && i.family === "IPv4" && !i.internal);
    if (external) {
      const port = new URL(bundlerUrl!).port;
      expect(await answers(`http://${external.address}:${port}/rpc`), `the bundler answers on ${external.address}`).to.equal(false);
    }

    const exited = new Promise((resolve) => child!.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    child = undefined;
    // Each child notices within a second; give them ten (a child still answering after that is the bug).
    for (let i = 0; i < 100 && ((await answers(rpcUrl!)) || (await answers(bundlerUrl!))); i++)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await answers(rpcUrl!), "the chain node outlived npm start").to.equal(false);
    expect(await answers(bundlerUrl!), "the bundler outlived npm start").to.equal(false);
  });

  it("stops within its shutdown deadline when SIGTERM comes with many calls in flight: exit 0, its children gone, its ports free", async function () {
    this.timeout(180_000);
    const started = await startLocal(path.join(dir, "loaded.db"));
    child = started.child;
    const pid = child.pid!;
    const key = /^API key: (atom_\S+)$/m.exec(started.output)![1];
    const gatewayUrl = /^Gateway: +(http:\/\/\S+)$/m.exec(started.output)![1];
    const endpoints = [
      gatewayUrl,
      /^Demo backend: +(http:\/\/\S+)$/m.exec(started.output)![1],
      /^Chain RPC: +(\S+)/m.exec(started.output)![1],
      /^Bundler: +(\S+)/m.exec(started.output)![1],
    ];
    const children = descendantsOf(pid);
    expect(children.length, "npm start runs its chain node and bundler as child processes").to.be.greaterThan(0);

    // The load: 48 callers in a loop, a quarter of them on the slow skill (800 ms at the backend), so that calls
    // are in flight at every moment; each call ends answered or refused, never hanging.
    let stopping = false;
    let answered = 0;
    let refused = 0;
    const caller = async (i: number) => {
      const body = i % 4 === 0 ? { skill_id: "slow", input: { ms: 800 } } : { skill_id: "echo", input: { n: i } };
      while (!stopping) {
        try {
          const res = await fetch(`${gatewayUrl}/v1/call`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify(body),
          });
          await res.arrayBuffer();
          answered++;
        } catch {
          refused++;
          return;
        }
      }
    };
    const load = Array.from({ length: 48 }, (_, i) => caller(i));
    while (answered < 300) await new Promise((resolve) => setTimeout(resolve, 50));

    const exited = new Promise<number | null>((resolve) => child!.once("exit", resolve));
    const signalledAt = performance.now();
    child.kill("SIGTERM");
    const code = await exited;
    const stoppedInMs = performance.now() - signalledAt;
    stopping = true;
    child = undefined;
    await Promise.all(load);
    expect(code, `npm start exited with ${code} after SIGTERM under load`).to.equal(0);
    expect(stoppedInMs, "npm start outlived its shutdown deadline").to.be.below(SHUTDOWN_DEADLINE_MS);
    expect(answered + refused).to.be.greaterThan(300);

    // Each child notices within a second; give them ten (one still running after that is the bug).
    const running = () => children.filter(isRunning);
    for (let i = 0; i < 100 && running().length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(running(), "child processes that outlived npm start").to.deep.equal([]);
    for (const endpoint of endpoints) expect(await portIsFree(endpoint), `${endpoint} still taken after npm start stopped`).to.equal(true);
  });
});
