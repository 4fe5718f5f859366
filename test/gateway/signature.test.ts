import { createHmac } from "node:crypto";
import { expect } from "chai";
import {
  forwardedIdempotencyKey,
  parseCharge,
  signCall,
  signCallV2,
  signCharge,
  verifyCall,
  verifyCharge,
} from "../../server/gateway/signature";

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

  describe("v2: the idempotency key under the signature", () => {
    const KEY = "idem_0123";
    const v2Headers = (overrides: { idempotencyKey?: string; body?: string; timestampSec?: number } = {}) => {
      const { idempotencyKey = KEY, body = BODY, timestampSec = NOW_SEC } = overrides;
      return {
        ...signedHeaders({ timestampSec, body }),
        idempotencyKey,
        signatureV2: signCallV2(SECRET, CALL_ID, timestampSec, idempotencyKey, body),
      };
    };

    it("is v2= and the hex HMAC-SHA256 of v2.<timestamp>.<callId>.<idempotencyKey>.<body>", () => {
      const expected = createHmac("sha256", SECRET).update(`v2.${NOW_SEC}.${CALL_ID}.${KEY}.${BODY}`).digest("hex");
      expect(signCallV2(SECRET, CALL_ID, NOW_SEC, KEY, BODY)).to.equal(`v2=${expected}`);
    });

    it("accepts a call whose v2 signature holds, with or without requireIdempotencyKey", () => {
      expect(verifyCall(SECRET, v2Headers(), BODY, { nowSec: NOW_SEC })).to.equal(true);
      expect(verifyCall(SECRET, v2Headers(), BODY, { nowSec: NOW_SEC, requireIdempotencyKey: true })).to.equal(true);
    });

    it("rejects another idempotency key under the signature, a tampered body, or the v2 signature of another secret", () => {
      expect(verifyCall(SECRET, { ...v2Headers(), idempotencyKey: "idem_9999" }, BODY, { nowSec: NOW_SEC })).to.equal(false);
      expect(verifyCall(SECRET, v2Headers(), `${BODY} `, { nowSec: NOW_SEC })).to.equal(false);
      const foreign = { ...v2Headers(), signatureV2: signCallV2("other", CALL_ID, NOW_SEC, KEY, BODY) };
      expect(verifyCall(SECRET, foreign, BODY, { nowSec: NOW_SEC })).to.equal(false);
    });

    it("rejects an idempotency key without its v2 signature, even beside a valid v1 signature", () => {
      const { signatureV2: _dropped, ...keyOnly } = v2Headers();
      expect(verifyCall(SECRET, keyOnly, BODY, { nowSec: NOW_SEC })).to.equal(false);
    });

    it("rejects a v1-only call when the backend requires the idempotency key", () => {
      expect(verifyCall(SECRET, signedHeaders(), BODY, { nowSec: NOW_SEC })).to.equal(true);
      expect(verifyCall(SECRET, signedHeaders(), BODY, { nowSec: NOW_SEC, requireIdempotencyKey: true })).to.equal(false);
    });

    it("never takes a v1 signature for a v2 one", () => {
      const { signature } = signedHeaders();
      const swapped = { ...v2Headers(), signatureV2: signature.replace(/^v1=/, "v2=") };
      expect(verifyCall(SECRET, swapped, BODY, { nowSec: NOW_SEC })).to.equal(false);
    });

    it("keeps the tolerance on the timestamp", () => {
      expect(verifyCall(SECRET, v2Headers({ timestampSec: NOW_SEC - 301 }), BODY, { nowSec: NOW_SEC })).to.equal(false);
    });
  });

  describe("forwardedIdempotencyKey", () => {
    it("is one key for one account's key, another for another account or key, and hides the caller's key", () => {
      const key = forwardedIdempotencyKey("acct-1", "order-17");
      expect(key).to.match(/^idem_[0-9a-f]{48}$/);
      expect(forwardedIdempotencyKey("acct-1", "order-17")).to.equal(key);
      expect(forwardedIdempotencyKey("acct-2", "order-17")).not.to.equal(key);
      expect(forwardedIdempotencyKey("acct-1", "order-18")).not.to.equal(key);
      expect(key).not.to.include("order-17");
    });
  });
});

describe("charge signatures (usage-priced skills)", () => {
  it("signCharge is v1= and the hex HMAC-SHA256 of <callId>.<charge> under the skill's secret", () => {
    const expected = createHmac("sha256", SECRET).update(`${CALL_ID}.0.0042`).digest("hex");
    expect(signCharge(SECRET, CALL_ID, "0.0042")).to.equal(`v1=${expected}`);
  });

  it("verifyCharge holds only for the same secret, call and charge text", () => {
    const signature = signCharge(SECRET, CALL_ID, "0.0042");
    expect(verifyCharge(SECRET, CALL_ID, "0.0042", signature)).to.equal(true);
    expect(verifyCharge("other", CALL_ID, "0.0042", signature)).to.equal(false);
    expect(verifyCharge(SECRET, "call-0002", "0.0042", signature)).to.equal(false);
    expect(verifyCharge(SECRET, CALL_ID, "0.00420", signature)).to.equal(false);
    expect(verifyCharge(SECRET, CALL_ID, "0.0042", signature.slice(0, -1))).to.equal(false);
    expect(verifyCharge(SECRET, CALL_ID, "0.0042", signature.replace("v1=", "v2="))).to.equal(false);
  });

  const READS: Array<[string, bigint]> = [
    ["0", 0n],
    ["0.0042", 4_200n],
    ["0.000001", 1n],
    ["0.01", 10_000n],
    ["1", 1_000_000n],
    ["12.5", 12_500_000n],
    ["999999999.999999", 999_999_999_999_999n],
  ];
  for (const [text, micros] of READS) {
    it(`parseCharge reads "${text}" as ${micros} base units`, () => expect(parseCharge(text)).to.equal(micros));
  }
  for (const text of [
    "",
    ".5",
    "5.",
    "0.0000001",
    "-0.001",
    "+0.001",
    "1e-3",
    "00.1",
    " 0.1",
    "0.1 ",
    "0,1",
    "1000000000",
    "0x10",
    "NaN",
  ]) {
    it(`parseCharge refuses ${JSON.stringify(text)}`, () => expect(parseCharge(text)).to.equal(undefined));
  }
});
