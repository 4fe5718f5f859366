import { expect } from "chai";
import { startDemoBackendThread } from "../../server/devstack/demo-backend-thread";
import type { DemoBackend } from "../../server/devstack/demo-backend";
import { rejectionOf } from "../helpers/ledger";
import { CALL_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signCall } from "../../server/gateway/signature";

/** A call as the gateway signs it (v1 headers), to one of the demo backend's routes. */
async function signedCall(backend: DemoBackend, route: string, secret: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const raw = JSON.stringify(body);
  const callId = crypto.randomUUID();
  const timestamp = Math.floor(Date.now() / 1000);
  const res = await fetch(backend.url + route, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      [CALL_ID_HEADER]: callId,
      [TIMESTAMP_HEADER]: String(timestamp),
      [SIGNATURE_HEADER]: signCall(secret, callId, timestamp, raw),
    },
    body: raw,
  });
  return { status: res.status, body: await res.json() };
}

/** npm start's demo backend on a worker thread of its own: the same routes and checks, its secrets set by message. */
describe("the demo backend on a worker thread (npm start)", () => {
  it("answers a call signed with the secret it was given, refuses others, and stops listening when closed", async () => {
    const backend = await startDemoBackendThread();
    try {
      // Until the thread holds the route's secret, nothing is genuine; once setSecret resolves, it is held.
      expect((await signedCall(backend, "/uppercase", "s3cret", { text: "hi" })).status).to.equal(401);
      await backend.setSecret("/uppercase", "s3cret");
      expect(await signedCall(backend, "/uppercase", "s3cret", { text: "hi" })).to.deep.equal({ status: 200, body: { text: "HI" } });
      expect((await signedCall(backend, "/uppercase", "another", { text: "hi" })).status).to.equal(401);
      // A genuine call the route cannot take is that call's error; the thread goes on answering.
      expect(await signedCall(backend, "/uppercase", "s3cret", null)).to.deep.equal({
        status: 422,
        body: { error: "input must be a JSON object" },
      });
      expect((await signedCall(backend, "/uppercase", "s3cret", { text: "again" })).status).to.equal(200);
    } finally {
      // The thread winds down by itself (the 5 s stop after which it would be terminated is not needed).
      const closing = performance.now();
      await backend.close();
      expect(performance.now() - closing).to.be.below(4_000);
    }
    const refused = await fetch(`${backend.url}/echo`, { method: "POST", body: "{}" }).then(
      () => "answered",
      (error: { cause?: { code?: string } }) => error.cause?.code,
    );
    expect(refused).to.equal("ECONNREFUSED");
    expect((await rejectionOf(backend.setSecret("/echo", "x"))).message).to.contain("closed");
  });

  it("says why it cannot start when its port is taken", async () => {
    const taken = await startDemoBackendThread();
    try {
      const port = Number(new URL(taken.url).port);
      expect((await rejectionOf(startDemoBackendThread(port))).message).to.match(/could not start: .*EADDRINUSE/);
    } finally {
      await taken.close();
    }
  });
});
