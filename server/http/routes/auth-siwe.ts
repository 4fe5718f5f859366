import express, { type Request, type RequestHandler, type Router } from "express";
import { jsonBody } from "../json-body";
import { type PublicClient, getAddress } from "viem";
import { createSiweMessage } from "viem/siwe";
import type { Sessions } from "../../identity/sessions";
import { SiweChainError, type SiweNonces, verifySiwe } from "../../identity/siwe";
import type { Config } from "../../config";
import { planSignIn } from "../../identity/sign-in-plan";
import { dataEnvelopeOf } from "../envelope";
import { publicBase } from "../public-url";
import { clientKey, storeFull } from "../rate-limits";
import { ApiError } from "../errors";
import { siweNonceQuery, siweNonceView, siweSignedInView, siweVerifyBody } from "../contract/auth";
import { parseRequest } from "../contract/common";
import { browserSession, finishSignIn, signInPost } from "../sign-in";

/**
 * Sign-In With Ethereum (EIP-4361), JSON:
 *   GET  /auth/siwe/nonce    a fresh single-use nonce (10 minutes), and the domain, URI and chain id
 *                            the message must name
 *   POST /auth/siwe/verify   { message, signature, switch_account? } → a session (cookies) for the
 *                            address's account, created on first use; with a session already open
 *                            (and its CSRF token), the address is linked to that account instead, and
 *                            an address of another account is refused (409 identity_taken) unless the
 *                            body says switch_account: true, which signs the browser in to that account
 * Both are rate-limited per client address; one address holds at most SIWE_NONCES_PER_CLIENT_MAX
 * unused nonces (its oldest go), the gateway SIWE_NONCES_MAX (429 beyond, until one expires).
 * The verify POST is a sign-in POST (../sign-in.ts: same origin, JSON). Every refusal of the
 * message is a 401 whose message says what was wrong; nothing is written but the nonce's use.
 */
export function siweRoutes(deps: {
  sessions: Sessions;
  config: Config;
  /** The gateway's chain, for smart-account signatures; without it only EOAs can sign in. */
  publicClient?: Pick<PublicClient, "verifyMessage">;
  log: (message: string, error?: unknown) => void;
  /** The nonces handed out, bounded per client address and in all (SIWE_NONCES_PER_CLIENT_MAX, SIWE_NONCES_MAX). */
  nonces: SiweNonces;
  /** The sign-in rate limit, per client address. */
  limit: RequestHandler;
}): Router {
  const router = express.Router();
  const nonces = deps.nonces;
  const guard = signInPost(deps.config);
  const json = jsonBody(16_384, "application/json");

  // The dashboard's origin: PUBLIC_URL, or else this server's own address. Never the request's
  // Host header: a phishing site's message names the phishing site's domain, and the domain
  // check exists to refuse it; a Host header saying the same would let it through.
  const originOf = (req: Request): URL => new URL(publicBase(deps.config, req));

  router.get("/auth/siwe/nonce", deps.limit, async (req, res) => {
    const origin = originOf(req);
    // With ?address=, the message to sign comes ready made (a browser has no EIP-4361 library,
    // and the message must name the address in its EIP-55 form). Checked first: a bad address
    // costs no nonce.
    const rawAddress = parseRequest(siweNonceQuery, req.query).address;
    const issued = await nonces.issue(clientKey(req));
    if (!issued.ok) throw storeFull("Too many sign-ins with a wallet are under way.", issued.retryAfterMs);
    const { nonce, expiresAtMs } = issued;
    res.set("cache-control", "no-store");
    res.json(
      dataEnvelopeOf(siweNonceView, {
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

  router.post("/auth/siwe/verify", deps.limit, guard, json, async (req, res) => {
    // Linking a wallet to the open session changes that account, so it needs the session's
    // CSRF token: otherwise another site could link its own wallet to a visitor's account.
    const current = await browserSession(deps.sessions, req);
    const body = parseRequest(siweVerifyBody, req.body ?? {}, { message: "unauthorized", signature: "unauthorized" });
    const switchAccount = body.switch_account ?? false;
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

    // Signed in already, a wallet is added to that account: the session itself is the link's origin.
    const plan = planSignIn({
      current: current?.accountId,
      owner: await deps.sessions.ownerOf("siwe", result.address),
      linkTo: current?.accountId,
      switchAccount,
    });
    if (!plan.ok) {
      // The only refusal possible here: a session is open, so a sign-in without switch_account links.
      throw new ApiError(
        "identity_taken",
        `${result.address} already signs in to another account: sign again with switch_account: true to switch to it.`,
      );
    }
    // Durable before it resolves: the account and identity it reports are on disk.
    const signedIn = await deps.sessions.signIn("siwe", result.address, { linkTo: plan.linkTo });
    if (!signedIn.ok) throw new ApiError("identity_taken", `${result.address} already signs in to another account.`);
    const { session, switched } = await finishSignIn(deps.sessions, res, current, signedIn.accountId, deps.config.secureCookies);
    res.json(
      dataEnvelopeOf(siweSignedInView, {
        account_id: signedIn.accountId,
        address: result.address,
        created: signedIn.created,
        linked: signedIn.linked,
        switched,
        // Also in the sg_csrf cookie; here for clients that are not browsers.
        csrf_token: session.csrfToken,
      }),
    );
  });

  return router;
}
