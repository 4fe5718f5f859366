import { expect } from "chai";
import type { CallOutcome } from "../../server/gateway/calls-store";
import { CSV_PAGE_CALLS } from "../../server/http/routes/usage";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { RefusalsStore } from "../../server/gateway/refusals-store";
import { signedIn } from "../helpers/session";

/** 12:00 UTC on Saturday 21 November 2026: the gateway's clock, so that "today" and "this month" are fixed. */
const NOW = Date.parse("2026-11-21T12:00:00.000Z");

/** The rows of a CSV answer (no quoted line breaks in these tests), the header first. */
/** The rows of an RFC 4180 file: cells split on commas outside quotes, a quoted cell's "" read as one ". */
const csvRows = (text: string) =>
  text
    .split("\r\n")
    .filter((line) => line !== "")
    .map((line) =>
      [...line.matchAll(/(?:^|,)("(?:[^"]|"")*"|[^,]*)/g)].map(([, cell]) =>
        cell.startsWith('"') ? cell.slice(1, -1).replaceAll('""', '"') : cell,
      ),
    );

describeEachEngine("usage endpoints: /v1/usage, /v1/usage.csv, /v1/usage/daily, /v1/usage/keys", (engine) => {
  let stack: TestStack;
  beforeEach(async () => {
    recorded = 0;
    stack = await startStack({ engine: engine.name, gateway: { now: () => NOW } });
  });
  afterEach(async () => {
    await stack.close();
  });

  /** A key of the buyer's, with a name. */
  const newKey = async (name: string) => (await stack.gw.keys.create(stack.buyerId, { name })).record;
  /** How many calls `record` wrote: the next is call-<recorded + 1>. */
  let recorded = 0;
  /** Writes a call to the log as the call path would (a charge of `chargedMicros`), at `createdAtMs`. */
  const record = (call: {
    apiKeyId: string;
    skill?: string;
    createdAtMs: number;
    chargedMicros?: bigint;
    outcome?: CallOutcome;
    accountId?: string;
  }) =>
    stack.gw.calls.record({
      id: `call-${++recorded}`,
      accountId: call.accountId ?? stack.buyerId,
      apiKeyId: call.apiKeyId,
      skillId: stack.gw.skills.resolve(call.skill ?? "echo")!.id,
      endpoint: "call",
      httpStatus: call.outcome === undefined || call.outcome === "success" ? 200 : 502,
      outcome: call.outcome ?? "success",
      chargedMicros: call.chargedMicros ?? 1_000n,
      holdId: null,
      latencyUs: 12_345,
      createdAtMs: call.createdAtMs,
    });

  /**
   * Two keys' calls: "laptop" calls echo three times today (one failed, free) and once on 2 November; "server" calls
   * fail (the skill) once today, once on 31 October, and is refused by a rate limit once today.
   */
  const seed = async () => {
    const laptop = await newKey("laptop");
    const server = await newKey("server");
    await record({ apiKeyId: laptop.id, createdAtMs: NOW - 3_000, chargedMicros: 1_000n });
    await record({ apiKeyId: laptop.id, createdAtMs: NOW - 2_000, chargedMicros: 2_500n });
    await record({ apiKeyId: laptop.id, createdAtMs: NOW - 1_000, chargedMicros: 0n, outcome: "skill_error" });
    await record({ apiKeyId: laptop.id, createdAtMs: Date.parse("2026-11-02T08:00:00Z"), chargedMicros: 4_000n });
    await record({ apiKeyId: server.id, skill: "fail", createdAtMs: NOW - 500, chargedMicros: 0n, outcome: "skill_error" });
    await record({ apiKeyId: server.id, skill: "fail", createdAtMs: Date.parse("2026-10-31T23:59:59.999Z"), chargedMicros: 7_000n });
    await record({ apiKeyId: server.id, createdAtMs: NOW - 100, chargedMicros: 0n, outcome: "rate_limited" });
    // What the key's limits refused is counted, not logged: 5 of "server"'s echo calls today, 2 of its fail calls on 31 October.
    const fail = stack.gw.skills.resolve("fail")!.id;
    await new RefusalsStore(stack.gw.db).add([
      {
        accountId: stack.buyerId,
        apiKeyId: server.id,
        skillId: stack.gw.skills.resolve("echo")!.id,
        outcome: "rate_limited",
        minuteMs: NOW - (NOW % 60_000),
        count: 5,
      },
      {
        accountId: stack.buyerId,
        apiKeyId: server.id,
        skillId: fail,
        outcome: "daily_limit_reached",
        minuteMs: Date.parse("2026-10-31T12:00:00Z"),
        count: 2,
      },
    ]);
    return { laptop, server };
  };
  const ids = (res: { body: { data: { calls: { id: string }[] } } }) => res.body.data.calls.map((c) => c.id);

  describe("GET /v1/usage", () => {
    it("lists the account's calls newest first with cost and status", async () => {
      await stack.post("/v1/call", { skill_id: "echo", input: {} });
      await stack.post("/v1/call", { skill_id: "fail", input: {} });
      await stack.post("/v1/skills/echo/call", {});
      const res = await stack.get("/v1/usage");
      expect(res.status).to.equal(200);
      const calls = res.body.data.calls;
      expect(calls.map((c: any) => [c.skill_id, c.status, c.http_status, c.cost])).to.deep.equal([
        ["echo", "success", 200, 0.001],
        ["fail", "failed", 502, 0],
        ["echo", "success", 200, 0.001],
      ]);
      expect(calls[0].endpoint).to.equal("/v1/skills/:skillId/call");
      expect(calls[1].outcome).to.equal("skill_error");
      expect(Date.parse(calls[0].created_at)).to.be.a("number").and.not.NaN;
    });

    it("names the key each call was made with, and shows the key's metadata as it is now", async () => {
      await stack.post("/v1/call", { skill_id: "echo", input: {} });
      const key = (await stack.gw.keys.authenticate(stack.key))!;
      const [call] = (await stack.get("/v1/usage")).body.data.calls;
      expect(call).to.include({ api_key_id: key.id, api_key_name: "", api_key_prefix: key.prefix });
      expect(call.api_key_metadata).to.deep.equal({});
      // Which agent the calls were for: the metadata given to the key later shows on its calls made before.
      await stack.gw.keys.update(key.id, stack.buyerId, () => ({ metadata: { agent: "researcher-7", end_user: "u_42" } }));
      const [again] = (await stack.get("/v1/usage")).body.data.calls;
      expect(again.api_key_metadata).to.deep.equal({ agent: "researcher-7", end_user: "u_42" });
    });

    it("shows only the caller's own calls", async () => {
      const other = await stack.addBuyer("1");
      await stack.post("/v1/call", { skill_id: "echo", input: {} }, { key: other.key });
      const res = await stack.get("/v1/usage");
      expect(res.body.data.calls).to.deep.equal([]);
    });

    it("pages with limit and before, and refuses a bad limit", async () => {
      for (let i = 0; i < 3; i++) {
        await stack.post("/v1/call", { skill_id: "echo", input: { i } });
        await new Promise((r) => setTimeout(r, 3));
      }
      const page = await stack.get("/v1/usage?limit=2");
      expect(page.body.data.calls).to.have.length(2);
      const rest = await stack.get(`/v1/usage?limit=2&before=${page.body.data.next_before}`);
      expect(rest.body.data.calls).to.have.length(1);
      expect(rest.body.data.next_before).to.equal(null);
      expect((await stack.get("/v1/usage?limit=0")).status).to.equal(400);
      expect((await stack.get("/v1/usage?limit=abc")).status).to.equal(400);
    });

    it("never skips calls that share a millisecond with a page's last one: that page runs to the end of it", async () => {
      // 7 calls in one millisecond and 2 in the one before, read 3 at a time: with a page
      // cut inside a millisecond, `before=<ms>` would skip the rest of it.
      const apiKeyId = (await stack.gw.keys.authenticate(stack.key))!.id;
      const ids: string[] = [];
      for (let i = 0; i < 9; i++) await record({ apiKeyId, createdAtMs: i < 2 ? 1_700_000_000_000 : 1_700_000_000_001 });
      for (let i = 1; i <= 9; i++) ids.push(`call-${recorded - 9 + i}`);
      const seen: string[] = [];
      let before = "";
      for (let pages = 0; pages < 10; pages++) {
        const page = await stack.get(`/v1/usage?limit=3${before}`);
        seen.push(...page.body.data.calls.map((c: { id: string }) => c.id));
        if (page.body.data.next_before === null) break;
        before = `&before=${page.body.data.next_before}`;
      }
      expect([...seen].sort()).to.deep.equal([...ids].sort());
      expect(seen.slice(0, 7)).to.deep.equal([...ids.slice(2)].reverse());
    });

    it("narrows the calls by key, by skill (slug or UUID) and by a range of days or times, all together", async () => {
      const { laptop, server } = await seed();
      const all = ids(await stack.get("/v1/usage"));
      expect(all).to.have.length(7);
      expect(ids(await stack.get(`/v1/usage?api_key_id=${laptop.id}`))).to.deep.equal(["call-3", "call-2", "call-1", "call-4"]);
      expect(ids(await stack.get("/v1/usage?skill_id=fail"))).to.deep.equal(["call-5", "call-6"]);
      const failUuid = stack.gw.skills.resolve("fail")!.id;
      expect(ids(await stack.get(`/v1/usage?skill_id=${failUuid.toUpperCase()}`))).to.deep.equal(["call-5", "call-6"]);
      // A day is a whole UTC day: 31 October ends at its last millisecond, November starts after it.
      expect(ids(await stack.get("/v1/usage?to=2026-10-31"))).to.deep.equal(["call-6"]);
      expect(ids(await stack.get("/v1/usage?from=2026-11-01&to=2026-11-20"))).to.deep.equal(["call-4"]);
      // A time bound is inclusive too, and its offset is honoured (13:00+01:00 is 12:00Z).
      const at = new Date(NOW - 1_000).toISOString();
      expect(ids(await stack.get(`/v1/usage?from=${at}&to=2026-11-21T13:00:00%2B01:00`))).to.deep.equal(["call-7", "call-5", "call-3"]);
      expect(ids(await stack.get(`/v1/usage?api_key_id=${server.id}&skill_id=fail&from=2026-11-21`))).to.deep.equal(["call-5"]);
      // A skill nobody by that name: no calls, not an error (skills are public; usage of one is the account's).
      expect(ids(await stack.get("/v1/usage?skill_id=no-such-skill"))).to.deep.equal([]);
    });

    it("answers 404 for a key that is not the account's, and 400 for dates that are not dates or out of order", async () => {
      await seed();
      const other = await stack.addBuyer("1");
      const othersKey = (await stack.gw.keys.authenticate(other.key))!.id;
      for (const id of [othersKey, "no-such-key", "x402"]) {
        const res = await stack.get(`/v1/usage?api_key_id=${id}`);
        expect(res.status, id).to.equal(404);
        expect(res.body).to.include({ success: false, code: "not_found", error: "No such key on this account." });
      }
      const bad: [string, RegExp][] = [
        ["from=yesterday", /^from must be a date/],
        ["from=2026-02-30", /^from must be a date/],
        ["to=2026-11-21T25:00:00Z", /^to must be a date/],
        ["to=2026-11-21T10:00:00", /^to must be a date/],
        ["from=1969-12-31", /^from must be a date/],
        ["from=2026-11-21&from=2026-11-22", /^from must be a date/],
        ["from=2026-11-21&to=2026-11-20", /^to must not be before from/],
        ["from=2026-11-21T12:00:00Z&to=2026-11-21T11:59:59Z", /^to must not be before from/],
        ["api_key_id=", /^api_key_id must be/],
        [`skill_id=${"s".repeat(129)}`, /^skill_id must be/],
      ];
      for (const [query, message] of bad) {
        const res = await stack.get(`/v1/usage?${query}`);
        expect(res.status, query).to.equal(400);
        expect(res.body.code, query).to.equal("invalid_request");
        expect(res.body.error, query).to.match(message);
      }
      // A range as wide as dates go is fine: it is paged like any other.
      expect(ids(await stack.get("/v1/usage?from=1970-01-01&to=9999-12-31&limit=2"))).to.have.length(2);
    });
  });

  describe("GET /v1/usage.csv", () => {
    it("streams the filtered calls as CSV: a header row, ISO UTC times, money as decimal USD and base units", async () => {
      const { laptop } = await seed();
      await stack.gw.keys.update(laptop.id, stack.buyerId, () => ({ metadata: { agent: "laptop-agent", note: '=1+2, "quoted"' } }));
      const res = await stack.get(`/v1/usage.csv?api_key_id=${laptop.id}&from=2026-11-01&to=2026-11-21`);
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.equal("text/csv; charset=utf-8; header=present");
      expect(res.headers.get("content-disposition")).to.equal('attachment; filename="usage-from-2026-11-01-to-2026-11-21.csv"');
      const rows = csvRows(res.body);
      expect(rows[0]).to.deep.equal([
        "created_at",
        "call_id",
        "skill_id",
        "skill_name",
        "api_key_id",
        "api_key_name",
        "api_key_metadata",
        "endpoint",
        "status",
        "outcome",
        "http_status",
        "cost_usd",
        "cost_base_units",
        "response_time_ms",
        "settlement",
        "batch_number",
      ]);
      expect(rows.slice(1).map((r) => r[1])).to.deep.equal(["call-3", "call-2", "call-1", "call-4"]);
      expect(rows[2]).to.deep.equal([
        "2026-11-21T11:59:58.000Z",
        "call-2",
        "echo",
        "echo",
        laptop.id,
        "laptop",
        '{"agent":"laptop-agent","note":"=1+2, \\"quoted\\""}',
        "/v1/call",
        "success",
        "success",
        "200",
        "0.0025",
        "2500",
        "12.35",
        "unsettled",
        "",
      ]);
      expect(rows[1].slice(8, 13)).to.deep.equal(["failed", "skill_error", "502", "0.00", "0"]);
      expect(rows[1][14]).to.equal("not_charged");
      // The same calls as the JSON list, in the same order.
      const listed = ids(await stack.get(`/v1/usage?api_key_id=${laptop.id}&from=2026-11-01&to=2026-11-21`));
      expect(rows.slice(1).map((r) => r[1])).to.deep.equal(listed);
    });

    it("pages through more calls than one read takes, each once, newest first", async () => {
      const apiKeyId = (await newKey("bulk")).id;
      const count = CSV_PAGE_CALLS * 2 + 3;
      await stack.gw.db.transaction(async (tx) => {
        for (let i = 0; i < count; i++) {
          // Pairs of calls share a millisecond, so page ends fall inside some.
          await stack.gw.calls.record(
            {
              id: `bulk-${String(i).padStart(5, "0")}`,
              accountId: stack.buyerId,
              apiKeyId,
              skillId: stack.gw.skills.resolve("echo")!.id,
              endpoint: "call",
              httpStatus: 200,
              outcome: "success",
              chargedMicros: 1_000n,
              holdId: null,
              latencyUs: 1_000,
              createdAtMs: NOW - count + Math.floor(i / 2) * 2,
            },
            tx,
          );
        }
      });
      const res = await stack.get("/v1/usage.csv");
      const rows = csvRows(res.body).slice(1);
      expect(rows).to.have.length(count);
      expect(new Set(rows.map((r) => r[1])).size).to.equal(count);
      const times = rows.map((r) => Date.parse(r[0]));
      expect(times).to.deep.equal([...times].sort((a, b) => b - a));
    });

    it("writes a name that a spreadsheet would run as a formula as text", async () => {
      const key = await newKey('=HYPERLINK("http://evil.example","click")');
      await record({ apiKeyId: key.id, createdAtMs: NOW });
      const text = (await stack.get("/v1/usage.csv")).body as string;
      expect(text).to.include(`,"'=HYPERLINK(""http://evil.example"",""click"")",`);
    });

    it("is the account's own with a session too, and refuses what GET /v1/usage refuses, in the JSON envelope", async () => {
      await seed();
      const ada = await signedIn(stack, "ada@example.com");
      const own = await ada.request("GET", "/v1/usage.csv");
      expect(own.status).to.equal(200);
      expect(csvRows(own.body)).to.have.length(1);
      const foreign = (await stack.gw.keys.authenticate(stack.key))!.id;
      const refused = await ada.request("GET", `/v1/usage.csv?api_key_id=${foreign}`);
      expect(refused.status).to.equal(404);
      expect(refused.body).to.include({ success: false, code: "not_found" });
      const bad = await stack.get("/v1/usage.csv?from=2026-11-22&to=2026-11-21");
      expect(bad.status).to.equal(400);
      expect(bad.headers.get("content-type")).to.match(/^application\/json/);
      expect((await stack.get("/v1/usage.csv", null)).status).to.equal(401);
    });
  });

  describe("GET /v1/usage/daily", () => {
    it("shows each day of a range with its total, and this month's spend to date whatever the range", async () => {
      await seed();
      const res = await stack.get("/v1/usage/daily?from=2026-10-30&to=2026-11-02");
      expect(res.status).to.equal(200);
      const data = res.body.data;
      expect(data).to.deep.include({ currency: "USDC", from: "2026-10-30", to: "2026-11-02" });
      expect(data.days.map((d: any) => [d.date, d.spend_base_units, d.calls, d.refused])).to.deep.equal([
        ["2026-10-30", "0", 0, 0],
        ["2026-10-31", "7000", 1, 2],
        ["2026-11-01", "0", 0, 0],
        ["2026-11-02", "4000", 1, 0],
      ]);
      expect(data.total).to.deep.equal({ spend: 0.011, spend_base_units: "11000", calls: 2, refused: 2 });
      // November: 1,000 + 2,500 + 0 today, 4,000 on the 2nd, and a failed call of "server"; the 429 is no call, and
      // today's 5 refusals by the key's limits are counted apart.
      expect(data.month_to_date).to.deep.equal({ month: "2026-11", spend: 0.0075, spend_base_units: "7500", calls: 5, refused: 5 });
    });

    it("counts back `days` from today by default, and narrows by key and skill", async () => {
      const { laptop, server } = await seed();
      const last30 = (await stack.get("/v1/usage/daily")).body.data;
      expect(last30.days).to.have.length(30);
      expect(last30).to.deep.include({ from: "2026-10-23", to: "2026-11-21" });
      expect(last30.days.at(-1)).to.deep.equal({ date: "2026-11-21", spend: 0.0035, spend_base_units: "3500", calls: 4, refused: 5 });
      const byLaptop = (await stack.get(`/v1/usage/daily?days=7&api_key_id=${laptop.id}`)).body.data;
      expect(byLaptop.total).to.deep.equal({ spend: 0.0035, spend_base_units: "3500", calls: 3, refused: 0 });
      expect(byLaptop.month_to_date).to.include({ spend_base_units: "7500", calls: 4 });
      const serverFails = (await stack.get(`/v1/usage/daily?from=2026-10-01&to=2026-11-30&api_key_id=${server.id}&skill_id=fail`)).body
        .data;
      expect(serverFails.days).to.have.length(61);
      expect(serverFails.total).to.deep.equal({ spend: 0.007, spend_base_units: "7000", calls: 2, refused: 2 });
      expect(serverFails.month_to_date).to.include({ spend_base_units: "0", calls: 1 });
    });

    it("refuses a range it cannot draw: days with from, from after to, more than 366 days, times, a foreign key", async () => {
      const other = await stack.addBuyer("1");
      const othersKey = (await stack.gw.keys.authenticate(other.key))!.id;
      const bad: [string, number, RegExp][] = [
        ["days=7&from=2026-11-01", 400, /^days goes without from/],
        ["from=2026-11-22", 400, /^from must not be after to/],
        ["from=2026-11-02&to=2026-11-01", 400, /^to must not be before from/],
        ["from=2025-11-20&to=2026-11-21", 400, /^from and to must be at most 366 days apart/],
        ["from=1970-01-01&to=9999-12-31", 400, /^from and to must be at most 366 days apart/],
        ["to=2026-11-21&days=367", 400, /^days must be an integer from 1 to 366/],
        ["from=2026-11-01T00:00:00Z", 400, /^from must be a date from 1970 on/],
        [`api_key_id=${othersKey}`, 404, /^No such key on this account/],
      ];
      for (const [query, status, message] of bad) {
        const res = await stack.get(`/v1/usage/daily?${query}`);
        expect(res.status, query).to.equal(status);
        expect(res.body.error, query).to.match(message);
      }
      const widest = (await stack.get("/v1/usage/daily?from=2025-11-21&to=2026-11-21")).body.data;
      expect(widest.days).to.have.length(366);
    });
  });

  describe("GET /v1/usage/keys", () => {
    it("counts each of the account's keys' calls and spend today, this month and in total", async () => {
      const { laptop, server } = await seed();
      const other = await stack.addBuyer("1");
      await record({ apiKeyId: (await stack.gw.keys.authenticate(other.key))!.id, accountId: other.accountId, createdAtMs: NOW });
      const res = await stack.get("/v1/usage/keys");
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ currency: "USDC", day: "2026-11-21", month: "2026-11" });
      const byId = new Map(res.body.data.keys.map((k: { api_key_id: string }) => [k.api_key_id, k]));
      expect([...byId.keys()].sort()).to.deep.equal([laptop.id, server.id].sort());
      expect(byId.get(laptop.id)).to.deep.equal({
        api_key_id: laptop.id,
        today: { spend: 0.0035, spend_base_units: "3500", calls: 3 },
        month: { spend: 0.0075, spend_base_units: "7500", calls: 4 },
        total: { spend: 0.0075, spend_base_units: "7500", calls: 4 },
      });
      expect(byId.get(server.id)).to.deep.equal({
        api_key_id: server.id,
        today: { spend: 0, spend_base_units: "0", calls: 1 },
        month: { spend: 0, spend_base_units: "0", calls: 1 },
        total: { spend: 0.007, spend_base_units: "7000", calls: 2 },
      });
      expect((await stack.get("/v1/usage/keys", null)).status).to.equal(401);
    });
  });
});
