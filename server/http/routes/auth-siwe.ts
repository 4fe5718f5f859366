import express, { type Request, type Router } from "express";
import { jsonBody } from "../json-body";
import { type PublicClient, getAddress, isAddress } from "viem";
import { createSiweMessage } from "viem/siwe";
import type { Sessions } from "../../accounts/sessions";
import { SiweChainError, SiweNonces, verifySiwe } from "../../accounts/siwe";
import type { Config } from "../../config";
import type { Ledger } from "../../ledger/ledger";
import { dataEnvelope } from "../envelope";
import { publicBase } from "../public-url";
import { ApiError } from "../errors";

/**
 * Sign-In With Ethereum (EIP-4361), JSON:
 *   GET  /auth/siwe/nonce    a fresh single-use nonce (10 minutes), and the domain, URI and chain id
 *                            the message must name
 *   POST /auth/siwe/verify   { message, signature } → a session (cookies) for the address's account,
 *                            created on first use; with a session already open (and its CSRF token),
 *                            the address is linked to that account instead
 * Every refusal is a 401 whose message says what was wrong; nothing is written but the nonce's use.
 */
export function siweRoutes(deps: {
  sessions: Sessions;
  ledger: Ledger;
  config: Config;
  /** The gateway's chain, for smart-account signatures; without it only EOAs can sign in. */
  publicClient?: Pick<PublicClient, "verifyMessage">;
  log: (message: string, error?: unknown) => void;
}): Router {
  const router = express.Router();
  const nonces = new SiweNonces(deps.ledger.db, deps.ledger.commit);
  const requireSession = deps.sessions.require();
  const json = jsonBody(16_384);

  // The dashboard's origin: PUBLIC_URL, or else this server's own address. Never the request's
  // Host header: a phishing site's message names the phishing site's domain, and the domain
  // check exists to refuse it; a Host header saying the same would let it through.
  const originOf = (req: Request): URL => new URL(publicBase(deps.config, req));

  router.get("/auth/siwe/nonce", async (req, res) => {
    const origin = originOf(req);
    // With ?address=, the message to sign comes ready made (a browser has no EIP-4361 library,
    // and the message must name the address in its EIP-55 form). Checked first: a bad address
    // costs no nonce.
    const rawAddress = req.query.address;
    if (rawAddress !== undefined && (typeof rawAddress !== "string" || !isAddress(rawAddress, { strict: false }))) {
      throw new ApiError("invalid_request", "address must be a 0x-prefixed 20-byte hex address.");
    }
    const { nonce, expiresAtMs } = await nonces.issue();
    res.set("cache-control", "no-store");
    res.json(
      dataEnvelope({
        nonce,
        expires_at: new Date(expiresAtMs).toISOString(),
        domain: origin.host,
        uri: origin.origin,
        chain_id: deps.config.siweChainId,
        ...(rawAddress === undefined
          ? {}
          : {
              message: createSiweMessage({
                domain: origin.host,
                address: getAddress(rawAddress),
                statement: "Sign in to Skill Gateway.",
                uri: origin.origin,
                version: "1",
                chainId: deps.config.siweChainId,
                nonce,
                issuedAt: new Date(),
                expirationTime: new Date(expiresAtMs),
              }),
            }),
      }),
    );
  });

  router.post("/auth/siwe/verify", json, async (req, res) => {
    // Linking a wallet to the open session changes that account, so it needs the session's
    // CSRF token: otherwise another site could link its own wallet to a visitor's account.
    if (deps.sessions.read(req)) requireSession(req, res, () => {});
    const body = req.body as { message?: unknown; signature?: unknown } | undefined;
    if (!body || typeof body !== "object" || typeof body.message !== "string" || typeof body.signature !== "string") {
      throw new ApiError("unauthorized", "Send { message, signature }: the EIP-4361 message as signed, and its signature (0x hex).");
    }
    let result;
    try {
      result = await verifySiwe({
        message: body.message,
        signature: body.signature,
        expected: { origin: originOf(req), chainId: deps.config.siweChainId },
        nonces,
        publicClient: deps.publicClient,
      });
    } catch (error) {
      if (!(error instanceof SiweChainError)) throw error;
      deps.log("SIWE: the chain could not verify a signature", error.cause);
      throw new ApiError("chain_unavailable", "The chain could not be reached to verify this signature; get a new nonce and try again.");
    }
    if (!result.ok) throw new ApiError("unauthorized", `Sign-in refused: ${result.message}`);

    const linkTo = req.session?.accountId;
    const signedIn = deps.sessions.signIn("siwe", result.address, { linkTo });
    if (!signedIn.ok) throw new ApiError("identity_taken", `${result.address} already signs in to another account.`);
    await deps.ledger.commit.durable();
    const session = linkTo === undefined ? await deps.sessions.open(res, signedIn.accountId) : req.session!;
    res.json(
      dataEnvelope({
        account_id: signedIn.accountId,
        address: result.address,
        created: signedIn.created,
        linked: signedIn.linked,
        // Also in the sg_csrf cookie; here for clients that are not browsers.
        csrf_token: session.csrfToken,
      }),
    );
  });

  return router;
}
