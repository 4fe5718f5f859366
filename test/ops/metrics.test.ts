import { expect } from "chai";
import { type TestStack, startStack } from "../helpers/gateway";

const TOKEN = "metrics-test-token-0123456789";

/** The value of one sample in Prometheus text: `name{labels} value`, labels written as given (0 when absent). */
function sample(text: string, name: string, labels = ""): number {
  const head = labels === "" ? name : `${name}{${labels}}`;
  const line = text.split("\n").find((l) => l.startsWith(`${head} `));
  return line === undefined ? 0 : Number(line.slice(head.length + 1));
}

describe("GET /metrics", () => {
  let stack: TestStack;
  beforeEach(async () => {
    stack = await startStack({ config: { metricsToken: TOKEN, rateLimitPerMin: 3 } });
  });
  afterEach(async () => {
    await stack.close();
  });

  const scrape = async (s: TestStack = stack) => {
    const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^text\/plain; version=0\.0\.4/);
    return res.text();
  };

  it("moves by exactly one call and its charge after a paid call", async () => {
    const before = await scrape();
    const available = await stack.available();
    const res = await stack.post("/v1/call", { skill_id: "echo", input: {} });
    expect(res.status).to.equal(200);
    const after = await scrape();
    const charged = available - (await stack.available());
    expect(charged).to.equal(1_000n);

    const moved = (name: string, labels = "") => sample(after, name, labels) - sample(before, name, labels);
    expect(moved("gateway_calls_total", 'skill="echo",outcome="success"')).to.equal(1);
    expect(moved("gateway_charged_micros_total", 'skill="echo"')).to.equal(Number(charged));
    expect(moved("gateway_call_duration_seconds_count", 'outcome="success"')).to.equal(1);
    expect(moved("gateway_call_duration_seconds_sum", 'outcome="success"')).to.be.above(0);
    // The charge was made durable by at least one commit, which released the waiting response.
    expect(moved("gateway_ledger_commits_total")).to.be.at.least(1);
    expect(moved("gateway_ledger_commit_waiters_sum")).to.be.at.least(1);
    expect(moved("gateway_ledger_commit_duration_seconds_count")).to.equal(moved("gateway_ledger_commits_total"));
    expect(sample(after, "gateway_holds_open")).to.equal(0);
    // Node's own, served because a scraper is configured.
    expect(after).to.match(/^nodejs_eventloop_lag_seconds /m);
    expect(moved("gateway_http_requests_total", 'method="POST",route="/v1/call",status="200"')).to.equal(1);
  });

  it("counts a failed call without a charge, and rate-limit refusals", async () => {
    const before = await scrape();
    expect((await stack.post("/v1/call", { skill_id: "fail", input: {} })).status).to.equal(502);
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(200);
    expect((await stack.post("/v1/call", { skill_id: "echo", input: {} })).status).to.equal(429);
    const after = await scrape();
    const moved = (name: string, labels = "") => sample(after, name, labels) - sample(before, name, labels);
    expect(moved("gateway_calls_total", 'skill="fail",outcome="skill_error"')).to.equal(1);
    expect(moved("gateway_calls_total", 'skill="echo",outcome="rate_limited"')).to.equal(1);
    expect(moved("gateway_charged_micros_total", 'skill="fail"')).to.equal(0);
    expect(moved("gateway_charged_micros_total", 'skill="echo"')).to.equal(2_000);
    expect(moved("gateway_rate_limit_refusals_total", 'route="/v1/call"')).to.equal(1);
  });

  it("refuses a scrape without the token, or with another, in the spec's envelope", async () => {
    for (const authorization of [undefined, "Bearer wrong-token-0123456789", `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
      const res = await fetch(`${stack.url}/metrics`, { headers: authorization ? { authorization } : {} });
      expect(res.status, String(authorization)).to.equal(401);
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).to.include({ success: false, code: "unauthorized", request_id: res.headers.get("x-request-id") });
      expect(JSON.stringify(body)).to.not.include("gateway_calls_total");
    }
  });

  it("is not served at all when no METRICS_TOKEN is configured", async () => {
    const open = await startStack();
    try {
      await open.post("/v1/call", { skill_id: "echo", input: {} });
      const res = await fetch(`${open.url}/metrics`);
      expect(res.status).to.equal(404);
      expect(((await res.json()) as { code: string }).code).to.equal("not_found");
    } finally {
      await open.close();
    }
  });

  it("keeps each gateway's metrics apart when several run in one process", async () => {
    const other = await startStack({ config: { metricsToken: TOKEN } });
    try {
      await stack.post("/v1/call", { skill_id: "echo", input: {} });
      expect(sample(await scrape(stack), "gateway_calls_total", 'skill="echo",outcome="success"')).to.equal(1);
      expect(sample(await scrape(other), "gateway_calls_total", 'skill="echo",outcome="success"')).to.equal(0);
    } finally {
      await other.close();
    }
  });
});
