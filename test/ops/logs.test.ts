import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Writable } from "node:stream";
import { expect } from "chai";
import type SonicBoom from "sonic-boom";
import { TS_REGISTER } from "../../server/devstack/child-process";
import { LOG_BUFFER_BYTES, LOG_FLUSH_MS, createLogger, logDestination } from "../../server/ops/log";
import { type TestStack, startStack } from "../helpers/gateway";
import { sqliteOf } from "../helpers/ledger";
import { sameOrigin, send, signedIn } from "../helpers/session";

/** A logger writing JSON lines into memory, as the gateway writes them to standard output. */
function capturedLogger() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  return { lines, logger: createLogger({ level: "info", destination: stream }) };
}

describe("the gateway's log", () => {
  let stack: TestStack;
  let lines: string[];
  beforeEach(async () => {
    const captured = capturedLogger();
    lines = captured.lines;
    // No `log` override: the parts' messages go through the same logger.
    stack = await startStack({ gateway: { logger: captured.logger, log: undefined } });
  });
  afterEach(async () => {
    await stack.close();
  });

  const entries = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  /** The request's line, written once its response is done (which may be just after the client has it). */
  const requestLine = async (requestId: string | null) => {
    for (let i = 0; i < 100; i++) {
      const found = entries().find((entry) => entry.msg === "request" && entry.request_id === requestId);
      if (found) return found;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`no log line for request ${requestId}:\n${lines.join("\n")}`);
  };

  it("writes one JSON line per request: id, method, route, status, latency, and what a paid call charged", async () => {
    const before = await stack.available();
    const res = await stack.post("/v1/skills/echo/call", { n: 1 });
    expect(res.status).to.equal(200);
    const line = await requestLine(res.headers.get("x-request-id"));
    expect(line).to.include({
      level: 30,
      msg: "request",
      method: "POST",
      route: "/v1/skills/:skillId/call",
      status: 200,
      skill: "echo",
      outcome: "success",
      charged_micros: String(before - (await stack.available())),
    });
    expect(line.charged_micros).to.equal("1000");
    expect(line.latency_ms).to.be.a("number").and.to.be.above(0);
    expect(line.time).to.be.a("string");
    expect(entries().filter((entry) => entry.request_id === line.request_id)).to.have.length(1);
  });

  it("names the route pattern, not the URL: no path parameter, no query", async () => {
    const keys = await stack.get("/v1/skills/echo?secret=in-the-query");
    const page = await fetch(`${stack.url}/auth/email/callback?token=in-the-query`);
    const missing = await stack.get("/v1/no/such/route?x=in-the-query");
    expect((await requestLine(keys.headers.get("x-request-id"))).route).to.equal("/v1/skills/:skillId");
    expect((await requestLine(page.headers.get("x-request-id"))).route).to.equal("/auth/email/callback");
    expect(await requestLine(missing.headers.get("x-request-id"))).to.include({ route: "(unmatched)", status: 404 });
    expect(lines.join("\n")).to.not.include("in-the-query");
  });

  it("adds the request id to the parts' own messages about that request", async () => {
    // A fault where calls' lines are written (in the file, not TEMP: the ledger writer's thread has a connection of its own).
    sqliteOf(stack.gw.db).db.exec("CREATE TRIGGER injected_fault BEFORE INSERT ON calls BEGIN SELECT RAISE(ABORT, 'injected fault'); END");
    const res = await stack.post("/v1/call", { skill_id: "echo", input: {} });
    expect(res.status).to.equal(500);
    await requestLine(res.headers.get("x-request-id"));
    const fault = entries().find((entry) => entry.msg === "internal error on the call path");
    expect(fault, lines.join("\n")).to.include({ level: 50, request_id: res.headers.get("x-request-id") });
    expect((fault!.error as { message: string }).message).to.include("injected fault");
  });

  it("never writes a key, a session cookie, a CSRF token or an e-mail link token, though requests carried them all", async () => {
    // An API key: a paid call, a call refused, and a bad key's 401.
    const calls = [
      await stack.post("/v1/call", { skill_id: "echo", input: {} }),
      await stack.post("/v1/call", { skill_id: "nope", input: {} }),
      await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: `${stack.key}x` }),
      await stack.get("/v1/balance"),
    ];
    // A dashboard session: its cookie and its CSRF token, on a read and a write that creates a key.
    const session = await signedIn(stack, "ada@example.com");
    const me = await session.request("GET", "/v1/me");
    const created = await session.request("POST", "/v1/keys", { name: "logged?" });
    // An e-mail sign-in: the link's token in a URL's query, then in a body.
    await send(`${stack.url}/auth/email/start`, "POST", sameOrigin(stack), { email: "bob@example.com" });
    const mail = (await stack.gw.db.value<string>("SELECT body FROM outbox WHERE to_address = ?", ["bob@example.com"]))!;
    const link = new URL(/(http:\/\/\S+)/.exec(mail)![1]);
    const linkToken = link.searchParams.get("token")!;
    const page = await fetch(`${stack.url}${link.pathname}${link.search}`);
    const verified = await send(`${stack.url}/auth/email/verify`, "POST", sameOrigin(stack), { token: linkToken });
    expect([me.status, created.status, page.status, verified.status]).to.deep.equal([200, 201, 200, 200]);
    const newSession = verified.headers.getSetCookie().join("; ");
    for (const res of [...calls, me, created, verified]) await requestLine(res.headers.get("x-request-id"));

    const secrets = {
      "the API key": stack.key,
      "the API key's secret part": stack.key.slice("atom_".length),
      "the key created in the dashboard": created.body.data.key as string,
      "the session cookie's token": session.cookie.split("=")[1],
      "the CSRF token": session.csrfToken,
      "the e-mail link's token": linkToken,
      "the new session's cookie": /=([^;]+)/.exec(newSession)![1],
    };
    const log = lines.join("\n");
    expect(lines.length).to.be.at.least(9);
    for (const [what, secret] of Object.entries(secrets)) {
      expect(secret.length, what).to.be.at.least(16);
      expect(log.includes(secret), `${what} is in the log`).to.equal(false);
    }
  });

  it("redacts secrets in an object that reaches a log call", () => {
    const captured = capturedLogger();
    captured.logger.info(
      {
        token: "tok-1",
        apiKey: "atom_def",
        detail: { authorization: "Bearer atom_abc" },
        headers: { "x-csrf-token": "csrf-1" },
        req: { headers: { cookie: "sg_session=xyz" } },
      },
      "something",
    );
    captured.logger.warn({ detail: { secret: "whsec_1" } }, "a detail");
    const log = captured.lines.join("\n");
    for (const secret of ["tok-1", "atom_abc", "atom_def", "csrf-1", "xyz", "whsec_1"]) expect(log).to.not.include(secret);
    expect(JSON.parse(captured.lines[0])).to.deep.include({
      token: "[redacted]",
      apiKey: "[redacted]",
      detail: { authorization: "[redacted]" },
    });
  });
});

describe("the gateway's log destination (logDestination)", () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "log-destination-"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const turn = () => new Promise((resolve) => setImmediate(resolve));

  it("gathers a server's lines into one write, made at the latest LOG_FLUSH_MS later, not one write a line", async () => {
    const file = path.join(dir, "gateway.log");
    const created = performance.now();
    const destination = logDestination(file) as SonicBoom;
    const writes: number[] = [];
    destination.on("write", (bytes: number) => writes.push(bytes));
    const logger = createLogger({ level: "info", destination });
    for (let i = 0; i < 10; i++) {
      logger.info({ i }, "request");
      await turn();
    }
    // Long enough for a write of each line to have completed, were there one.
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Unless this process stalled past the first periodic flush (a loaded machine), nothing is written yet.
    if (performance.now() - created < LOG_FLUSH_MS) {
      expect(writes, "lines written before LOG_FLUSH_MS, under LOG_BUFFER_BYTES").to.deep.equal([]);
    }
    await new Promise((resolve) => setTimeout(resolve, LOG_FLUSH_MS + 200));
    // One write, or two if a stall let the periodic flush fall among the lines: never one a line.
    expect(writes).to.have.length.within(1, 2);
    const lines = fs.readFileSync(file, "utf8").trim().split("\n");
    expect(lines.map((line) => (JSON.parse(line) as { i: number }).i)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    destination.end();
  });

  it("writes at once when LOG_BUFFER_BYTES have gathered", async () => {
    const destination = logDestination(path.join(dir, "full.log")) as SonicBoom;
    const writes: number[] = [];
    destination.on("write", (bytes: number) => writes.push(bytes));
    const logger = createLogger({ level: "info", destination });
    logger.info({ padding: "x".repeat(LOG_BUFFER_BYTES) }, "a long line");
    for (let i = 0; i < 20 && writes.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(writes).to.have.length(1);
    expect(writes[0]).to.be.greaterThan(LOG_BUFFER_BYTES);
    destination.end();
  });

  it("stops writing once no line comes: no empty write each LOG_FLUSH_MS for ever", async () => {
    const destination = logDestination(path.join(dir, "idle.log")) as SonicBoom;
    const writes: number[] = [];
    destination.on("write", (bytes: number) => writes.push(bytes));
    createLogger({ level: "info", destination }).info("one line");
    const period = () => new Promise((resolve) => setTimeout(resolve, LOG_FLUSH_MS));
    // The line's write, then a few flushes with nothing left to write, then the timer stops.
    for (let i = 0; i < 5; i++) await period();
    expect(writes.filter((bytes) => bytes > 0)).to.have.length(1);
    const settled = writes.length;
    for (let i = 0; i < 4; i++) await period();
    expect(writes.length, "writes made while no line came").to.equal(settled);
    // A new line starts it again.
    createLogger({ level: "info", destination }).info("another line");
    for (let i = 0; i < 2 && writes.filter((bytes) => bytes > 0).length < 2; i++) await period();
    expect(fs.readFileSync(path.join(dir, "idle.log"), "utf8").trim().split("\n")).to.have.length(2);
    destination.end();
  });

  it("writes what it gathered when the process exits", () => {
    const file = path.join(dir, "exit.log");
    const script = `const { createLogger, logDestination } = require(${JSON.stringify(path.join(__dirname, "../../server/ops/log"))});
      createLogger({ level: "info", destination: logDestination(${JSON.stringify(file)}) }).info("the last line");
      process.exit(0);`;
    const run = spawnSync(process.execPath, ["-r", TS_REGISTER, "-e", script], { encoding: "utf8" });
    expect(run.status, run.stderr).to.equal(0);
    expect((JSON.parse(fs.readFileSync(file, "utf8")) as { msg: string }).msg).to.equal("the last line");
  });
});
