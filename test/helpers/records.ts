import type { RecordCall } from "../../server/gateway/payment";

/** A payment's record that writes nothing: for tests of a payment that look at its money alone. */
export function noRecord(accountId = "buyer"): RecordCall {
  return {
    write: {
      line: {
        id: "no-record-call",
        accountId,
        apiKeyId: "k",
        skillId: "s",
        endpoint: "skill_call",
        httpStatus: 200,
        outcome: "success",
        chargedMicros: 0n,
        holdId: null,
        latencyUs: 0,
        createdAtMs: 0,
      },
    },
    run: async () => {},
  };
}
