import http from "node:http";
import type { AddressInfo } from "node:net";
import { CALL_ID_HEADER, CHARGE_HEADER, CHARGE_SIGNATURE_HEADER, signCharge } from "../../server/gateway/signature";

/**
 * A usage-priced skill's backend for tests (issue 27): it answers `{ ok: true }` with the charge its input asks for,
 * signed or not as asked, so one route shows every way a seller can report a charge:
 *
 *   { report: "0.0042" }                      X-Skill-Charge 0.0042, signed with the skill's secret (signCharge)
 *   { report: "0.0042", sign: "none" }        no X-Skill-Charge-Signature
 *   { report: "0.0042", sign: "wrong" }       signed with another secret
 *   { report: "0.0042", sign: "other_call" }  signed for another call id (an answer replayed from another call)
 *   { report: "0.0042", sign: "twice" }       the charge header sent twice
 *   {}                                         no charge header at all
 */
export interface ChargingBackend {
  url: string;
  /** Requests received. */
  hits: number;
  /** The signing secret of the skill the backend serves (told once the skill is registered). */
  setSecret(secret: string): void;
  close(): Promise<void>;
}

export async function startChargingBackend(): Promise<ChargingBackend> {
  let secret = "";
  const backend = { hits: 0 } as ChargingBackend;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      backend.hits++;
      const input = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as { report?: string; sign?: string };
      const callId = String(req.headers[CALL_ID_HEADER]);
      const headers: Record<string, string | string[]> = { "content-type": "application/json" };
      if (input.report !== undefined) {
        headers[CHARGE_HEADER] = input.sign === "twice" ? [input.report, input.report] : input.report;
        if (input.sign !== "none") {
          const key = input.sign === "wrong" ? "not-the-skill-secret" : secret;
          headers[CHARGE_SIGNATURE_HEADER] = signCharge(key, input.sign === "other_call" ? "another-call" : callId, input.report);
        }
      }
      res.writeHead(200, headers).end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  backend.url = `http://127.0.0.1:${port}`;
  backend.setSecret = (s) => void (secret = s);
  backend.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return backend;
}
