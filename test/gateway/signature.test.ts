import { createHmac } from "node:crypto";
import { expect } from "chai";
import { signCall, verifyCall } from "../../server/gateway/signature";

const SECRET = "skill-secret-4f2a";
const CALL_ID = "call-0001";
const NOW_SEC = 1_800_000_000;
const BODY = JSON.stringify({ text: "hello", n: 3 });

/** The headers a backend receives for a call signed now. */
const signedHeaders = (overrides: { callId?: string; timestampSec?: number; body?: string; secret?: string } = {}) => {
  const { callId = CALL_ID, timestampSec = NOW_SEC, body = BODY, secret = SECRET } = overrides;
  return { callId, timestamp: String(timestampSec), signature: signCall(secret, callId, timestampSec, body) };
};

describe("call signatures", () => {
  describe("signCall", () => {
    it("is v1= and the hex HMAC-SHA256 of <timestamp>.<callId>.<body>", () => {
      const expected = createHmac("sha256", SECRET).update(`${NOW_SEC}.${CALL_ID}.${BODY}`).digest("hex");
      expect(signCall(SECRET, CALL_ID, NOW_SEC, BODY)).to.equal(`v1=${expected}`);
    });

    it("changes with each of its inputs", () => {
      const base = signCall(SECRET, CALL_ID, NOW_SEC, BODY);
      expect(signCall("other", CALL_ID, NOW_SEC, BODY)).not.to.equal(base);
      expect(signCall(SECRET, "call-0002", NOW_SEC, BODY)).not.to.equal(base);
      expect(signCall(SECRET, CALL_ID, NOW_SEC + 1, BODY)).not.to.equal(base);
      expect(signCall(SECRET, CALL_ID, NOW_SEC, `${BODY} `)).not.to.equal(base);
    });
  });

  describe("verifyCall", () => {
    it("accepts a call signed with the skill's secret", () => {
      expect(verifyCall(SECRET, signedHeaders(), BODY, { nowSec: NOW_SEC })).to.equal(true);
    });

    it("rejects a tampered body", () => {
      const tampered = JSON.stringify({ text: "hello", n: 4 });
      expect(verifyCall(SECRET, signedHeaders(), tampered, { nowSec: NOW_SEC })).to.equal(false);
    });

    it("rejects a signature made with another secret", () => {
      expect(verifyCall(SECRET, signedHeaders({ secret: "someone-else" }), BODY, { nowSec: NOW_SEC })).to.equal(false);
    });

    it("rejects a signature replayed under another call id", () => {
      const headers = { ...signedHeaders(), callId: "call-0002" };
      expect(verifyCall(SECRET, headers, BODY, { nowSec: NOW_SEC })).to.equal(false);
    });

    it("rejects a signature moved to another timestamp", () => {
      const headers = { ...signedHeaders(), timestamp: String(NOW_SEC + 1) };
      expect(verifyCall(SECRET, headers, BODY, { nowSec: NOW_SEC })).to.equal(false);
    });

    it("accepts a timestamp up to the tolerance away, either side, and no further", () => {
      const at = (timestampSec: number) => verifyCall(SECRET, signedHeaders({ timestampSec }), BODY, { nowSec: NOW_SEC });
      expect(at(NOW_SEC - 300)).to.equal(true);
      expect(at(NOW_SEC + 300)).to.equal(true);
      expect(at(NOW_SEC - 301)).to.equal(false);
      expect(at(NOW_SEC + 301)).to.equal(false);
    });

    it("uses the tolerance it is given", () => {
      const stale = signedHeaders({ timestampSec: NOW_SEC - 31 });
      expect(verifyCall(SECRET, stale, BODY, { nowSec: NOW_SEC, toleranceSec: 30 })).to.equal(false);
      expect(verifyCall(SECRET, stale, BODY, { nowSec: NOW_SEC, toleranceSec: 31 })).to.equal(true);
    });

    it("checks against the real clock when no time is given", () => {
      const nowSec = Math.floor(Date.now() / 1000);
      expect(verifyCall(SECRET, signedHeaders({ timestampSec: nowSec }), BODY)).to.equal(true);
      expect(verifyCall(SECRET, signedHeaders({ timestampSec: nowSec - 3_600 }), BODY)).to.equal(false);
    });

    for (const missing of ["callId", "timestamp", "signature"] as const) {
      it(`rejects a call without its ${missing} header`, () => {
        const headers: Partial<ReturnType<typeof signedHeaders>> = signedHeaders();
        delete headers[missing];
        expect(verifyCall(SECRET, headers, BODY, { nowSec: NOW_SEC })).to.equal(false);
      });
    }

    for (const timestamp of ["", "-5", "1.8e9", `${NOW_SEC}.0`, ` ${NOW_SEC}`]) {
      it(`rejects the timestamp "${timestamp}", which is not whole seconds`, () => {
        const headers = { ...signedHeaders(), timestamp };
        expect(verifyCall(SECRET, headers, BODY, { nowSec: NOW_SEC })).to.equal(false);
      });
    }

    it("rejects a signature of the wrong length or without its version", () => {
      const { signature } = signedHeaders();
      for (const bad of [signature.slice(0, -1), `${signature}0`, signature.slice(3), signature.toUpperCase()]) {
        expect(verifyCall(SECRET, { ...signedHeaders(), signature: bad }, BODY, { nowSec: NOW_SEC }), bad).to.equal(false);
      }
    });
  });
});
