import { spawnSync } from "node:child_process";
import path from "node:path";
import { expect } from "chai";
import { ValidationPool } from "../../server/catalog/validation-pool";

/**
 * The review's schema that doubles validation work at every level of the input: `n` is
 * anyOf two copies of B, and B's property `a` is `n` again. Three `$ref`s, a few hundred
 * bytes, within every size bound; on input {"a":{"a":…}} 20 levels deep it took 3.5 s.
 */
const EXPONENTIAL = JSON.stringify({
  $ref: "#/definitions/n",
  definitions: {
    n: { anyOf: [{ $ref: "#/definitions/b" }, { $ref: "#/definitions/b" }] },
    b: { type: "object", required: ["a"], properties: { a: { $ref: "#/definitions/n" } } },
  },
});
const nestedA = (depth: number): unknown => (depth === 0 ? {} : { a: nestedA(depth - 1) });

describe("ValidationPool (schemas whose work cannot be bounded run on a worker, under a deadline)", () => {
  let pool: ValidationPool;
  afterEach(() => pool.close());

  it("validates on a worker: problems, or none", async () => {
    pool = new ValidationPool({ validateTimeoutMs: 2_000, compileTimeoutMs: 10_000 });
    const schema = JSON.stringify({ type: "object", required: ["text"], properties: { text: { type: "string" } } });
    expect(await pool.validate("k1", schema, { text: "hi" })).to.deep.equal({ kind: "problems", problems: [] });
    expect(await pool.validate("k1", schema, {})).to.deep.equal({
      kind: "problems",
      problems: ["input must have required property 'text'"],
    });
  });

  it("refuses a validation that overruns its deadline, replaces the worker, and serves the next job", async () => {
    pool = new ValidationPool({ validateTimeoutMs: 200, compileTimeoutMs: 10_000 });
    // Compiled first, so the deadline below is the validation's alone.
    expect(await pool.compile("exp", EXPONENTIAL)).to.deep.equal({ kind: "problems", problems: [] });
    const outcome = await pool.validate("exp", EXPONENTIAL, nestedA(40));
    expect(outcome).to.deep.equal({ kind: "too_costly", message: "validation took longer than 200 ms" });
    const simple = JSON.stringify({ type: "string" });
    expect(await pool.validate("simple", simple, "ok")).to.deep.equal({ kind: "problems", problems: [] });
  });

  it("serves the jobs queued behind one that expired while it waited (the fuzz run's 30 s hang, seed 980982787)", async () => {
    // Both jobs are queued while the worker starts. By the time it is ready the first has passed its deadline and
    // the second has not: the first is refused and the second must still run on the same, idle worker. Date.now is
    // the pool's clock for deadlines; it is moved here, the workers and timers run in real time.
    // Deadlines far beyond the worker's start in real time: only the moved clock makes the first one pass.
    pool = new ValidationPool({ validateTimeoutMs: 20_000, compileTimeoutMs: 0 });
    const schema = JSON.stringify({ type: "string" });
    const realNow = Date.now;
    const start = realNow();
    let fake = start;
    Date.now = () => fake;
    try {
      const first = pool.validate("s", schema, "first");
      fake = start + 30_000;
      const second = pool.validate("s", schema, "second");
      fake = start + 40_000;
      expect(await first).to.deep.equal({ kind: "too_costly", message: "no validation capacity within 20000 ms" });
      let timer: NodeJS.Timeout | undefined;
      const unanswered = new Promise((resolve) => (timer = setTimeout(resolve, 5_000, "never dispatched")));
      expect(await Promise.race([second, unanswered])).to.deep.equal({ kind: "problems", problems: [] });
      clearTimeout(timer);
    } finally {
      Date.now = realNow;
    }
  });

  it("refuses a queued job at its deadline even while no worker is ready to take it", async () => {
    pool = new ValidationPool({ validateTimeoutMs: 50, compileTimeoutMs: 0 });
    // A first worker takes a few hundred milliseconds (its script built, Ajv and the schema rules loaded): longer than
    // the deadline.
    const outcome = await pool.validate("s", JSON.stringify({ type: "string" }), "x");
    expect(outcome).to.deep.equal({ kind: "too_costly", message: "no validation capacity within 50 ms" });
    // No worker ready yet (none started at all while the workers' script is still being built): refused at the deadline.
    const workers = (pool as unknown as { slots: { ready: boolean }[] }).slots;
    expect(workers.length).to.be.at.most(1);
    expect(
      workers.filter((worker) => worker.ready),
      "answered before a worker could take the job",
    ).to.deep.equal([]);
  });

  it("refuses the jobs at their deadlines when the workers' script cannot be built, says so, and tries again for the next", async () => {
    const logged: string[] = [];
    pool = new ValidationPool({
      validateTimeoutMs: 100,
      compileTimeoutMs: 0,
      // A real build (esbuild) of an entry requiring a module that does not exist: as an install whose build fails.
      entry: path.join(__dirname, "..", "fixtures", "threads", "does-not-build.ts"),
      log: (message) => logged.push(message),
    });
    const schema = JSON.stringify({ type: "string" });
    const refused = { kind: "too_costly", message: "no validation capacity within 100 ms" };
    // The build's failure is logged when esbuild gives up, which a loaded host may take longer than the deadline to.
    const loggedTimes = async (count: number) => {
      for (const until = Date.now() + 10_000; logged.length < count && Date.now() < until;)
        await new Promise((resolve) => setTimeout(resolve, 10));
      return logged;
    };
    expect(await pool.validate("s", schema, "first")).to.deep.equal(refused);
    expect(await loggedTimes(1)).to.deep.equal(["the schema validation workers could not be built"]);
    expect(await pool.validate("s", schema, "second")).to.deep.equal(refused);
    expect(await loggedTimes(2)).to.have.length(2);
    expect((pool as unknown as { slots: unknown[] }).slots, "no worker started").to.deep.equal([]);
  });

  it("refuses the job a worker has in hand when the pool closes, and starts no worker afterwards", async () => {
    pool = new ValidationPool({ validateTimeoutMs: 30_000, compileTimeoutMs: 10_000 });
    await pool.compile("exp", EXPONENTIAL);
    // Seconds of work on the worker (40 levels of a schema that doubles its work at each): still running at close.
    const running = pool.validate("exp", EXPONENTIAL, nestedA(40));
    await new Promise((resolve) => setTimeout(resolve, 50));
    await pool.close();
    const timeout = new Promise((resolve) => setTimeout(resolve, 5_000, "still waiting"));
    expect(await Promise.race([running, timeout])).to.deep.equal({ kind: "too_costly", message: "the gateway is shutting down" });
    const workers = (pool as unknown as { slots: unknown[] }).slots;
    expect(workers, "a worker was started after close").to.have.length(0);
    expect(await pool.validate("s", JSON.stringify({ type: "string" }), "x")).to.deep.equal({
      kind: "too_costly",
      message: "the gateway is shutting down",
    });
    expect(workers).to.have.length(0);
  });

  it("lets the event loop run while a worker validates", async () => {
    pool = new ValidationPool({ validateTimeoutMs: 300, compileTimeoutMs: 10_000 });
    await pool.compile("exp", EXPONENTIAL);
    const order: string[] = [];
    const validation = pool.validate("exp", EXPONENTIAL, nestedA(40)).then(() => order.push("validation"));
    await new Promise((resolve) => setTimeout(resolve, 10)).then(() => order.push("timer"));
    await validation;
    expect(order).to.deep.equal(["timer", "validation"]);
  });

  it("says a schema that does not compile is invalid", async () => {
    pool = new ValidationPool({ validateTimeoutMs: 2_000, compileTimeoutMs: 10_000 });
    const outcome = await pool.compile(
      "bad",
      JSON.stringify({ $ref: "#/definitions/x", definitions: { x: { type: "string", pattern: "(a)\\1" } } }),
    );
    expect(outcome.kind).to.equal("invalid_schema");
  });

  it("keeps a script alive while it awaits a validation, and lets it exit once the pool is idle", () => {
    // A script (the register-skill command) awaits a compile and does nothing else: an idle,
    // unreferenced worker must not let it exit before the answer, nor keep it alive after.
    const code = `
      const { ValidationPool } = require(${JSON.stringify(path.resolve(__dirname, "../../server/catalog/validation-pool"))});
      const pool = new ValidationPool({ validateTimeoutMs: 2000, compileTimeoutMs: 20000 });
      pool.compile("k", JSON.stringify({ $ref: "#/definitions/a", definitions: { a: { type: "string" } } }))
        .then((outcome) => process.stdout.write(JSON.stringify(outcome)));`;
    const child = spawnSync(process.execPath, ["-r", "ts-node/register/transpile-only", "-e", code], { timeout: 30_000, encoding: "utf8" });
    expect(child.signal, "the script did not exit once the pool was idle").to.equal(null);
    expect(child.stdout).to.equal('{"kind":"problems","problems":[]}');
  });
});
