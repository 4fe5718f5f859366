import { createHash, randomBytes } from "node:crypto";
import { expect } from "chai";
import type { Response } from "express";
import type { OAuthClientInformationFull } from "@modelcontextprotocol/sdk/shared/auth.js";
import { ApiKeys } from "../../server/identity/api-keys";
import { InvalidTokenProblem, McpOAuth } from "../../server/identity/mcp-oauth";
import type { Database } from "../../server/db/sql";
import { Ledger } from "../../server/ledger/ledger";
import { describeEachEngine } from "../helpers/engines";

const ALICE = "user:alice";
const RESOURCE = "http://127.0.0.1:8080/mcp";
const REDIRECT = "http://127.0.0.1:9/cb";
const HOUR_MS = 3_600_000;

/** The S256 challenge of a verifier (RFC 7636 section 4.2). */
const challengeOf = (verifier: string) => createHash("sha256").update(verifier).digest("base64url");

/** What the authorize step hands the provider on an Express response: the resource and the consent page. */
function redirectRecorder(): { res: Response; location: () => string } {
  let location = "";
  const res = {
    locals: { mcpResource: RESOURCE, consentUrl: (id: string) => `http://127.0.0.1:8080/connect?request=${id}` },
    redirect: (_status: number, to: string) => {
      location = to;
    },
  } as unknown as Response;
  return { res, location: () => location };
}

describeEachEngine("McpOAuth (the hosted MCP server's OAuth provider)", (engine) => {
  let db: Database;
  let keys: ApiKeys;
  let nowMs: number;
  let oauth: McpOAuth;
  let client: OAuthClientInformationFull;

  beforeEach(async () => {
    db = await engine.open();
    await (await Ledger.open(db)).ensureAccount({ id: ALICE, kind: "user", name: "Alice" });
    keys = new ApiKeys(db, 0);
    nowMs = Date.now();
    oauth = new McpOAuth(
      db,
      keys,
      { accessTokenTtlMs: HOUR_MS, refreshTokenTtlMs: 24 * HOUR_MS, clientsMax: 10, requestsMax: 10 },
      () => nowMs,
    );
    client = await oauth.clientsStore.registerClient!({ redirect_uris: [REDIRECT], client_name: "Unit" });
  });

  /** A consented grant's first tokens, with `consent`'s limits. */
  const grant = async (expiresAtMs: number | null = null) => {
    const verifier = randomBytes(32).toString("base64url");
    const { res, location } = redirectRecorder();
    await oauth.authorize(client, { codeChallenge: challengeOf(verifier), redirectUri: REDIRECT, state: "s1" }, res);
    const requestId = new URL(location()).searchParams.get("request")!;
    const approved = await oauth.approve(requestId, ALICE, { allowedSkills: null, spendLimit: null, expiresAtMs });
    const code = new URL(approved!.redirectTo).searchParams.get("code")!;
    expect(await oauth.challengeForAuthorizationCode(client, code)).to.equal(challengeOf(verifier));
    return { tokens: await oauth.exchangeAuthorizationCode(client, code, undefined, REDIRECT), keyId: approved!.keyId };
  };

  it("registers every client as public, and keeps only what it uses of the registration", async () => {
    expect(client).to.include({ token_endpoint_auth_method: "none", client_name: "Unit" });
    expect(await oauth.clientsStore.getClient(client.client_id)).to.deep.include({ redirect_uris: [REDIRECT] });
    expect(await oauth.clientsStore.getClient("not-a-uuid")).to.equal(undefined);
  });

  it("refuses a resource other than its MCP endpoint, an unknown scope and a malformed challenge", async () => {
    const { res } = redirectRecorder();
    const base = { codeChallenge: challengeOf("x".repeat(43)), redirectUri: REDIRECT };
    const refusals: string[] = [];
    for (const params of [
      { ...base, resource: new URL("https://elsewhere.example/mcp") },
      { ...base, scopes: ["admin"] },
      { ...base, codeChallenge: "short" },
    ])
      await oauth.authorize(client, params, res).catch((error: { errorCode: string }) => refusals.push(error.errorCode));
    expect(refusals).to.deep.equal(["invalid_target", "invalid_scope", "invalid_request"]);
  });

  it("never lets a token outlive its grant's key", async () => {
    const { tokens } = await grant(nowMs + 10 * 60_000);
    expect(tokens.expires_in).to.equal(600);
    const info = await oauth.verifyAccessToken(tokens.access_token);
    expect(info.expiresAt).to.equal(Math.floor((nowMs + 10 * 60_000) / 1_000));
    expect(info.resource?.href).to.equal(RESOURCE);
  });

  it("refuses an expired access token, and a refresh token presented by another client", async () => {
    const { tokens } = await grant();
    const other = await oauth.clientsStore.registerClient!({ redirect_uris: [REDIRECT], client_name: "Other" });
    const refused = await oauth.exchangeRefreshToken(other, tokens.refresh_token!).catch((error: { errorCode: string }) => error.errorCode);
    expect(refused).to.equal("invalid_grant");
    // The other client's attempt used nothing up: the rightful client still refreshes.
    expect((await oauth.exchangeRefreshToken(client, tokens.refresh_token!)).access_token).to.match(/^sgat_/);
    nowMs += HOUR_MS;
    let expired: unknown;
    await oauth.verifyAccessToken(tokens.access_token).catch((error: unknown) => (expired = error));
    expect(expired).to.be.instanceOf(InvalidTokenProblem);
  });

  it("revokes an access token alone, and a whole grant with its refresh token (RFC 7009)", async () => {
    const { tokens, keyId } = await grant();
    await oauth.revokeToken(client, { token: tokens.access_token });
    await oauth.verifyAccessToken(tokens.access_token).then(
      () => expect.fail("revoked"),
      () => undefined,
    );
    expect((await keys.get(keyId))!.revokedAtMs).to.equal(null);
    await oauth.revokeToken(client, { token: tokens.refresh_token! });
    expect((await keys.get(keyId))!.revokedAtMs).to.not.equal(null);
    expect(Number(await db.value("SELECT COUNT(*) FROM mcp_oauth_tokens WHERE api_key_id = ?", [keyId]))).to.equal(0);
  });

  it("purges expired requests, codes and tokens, and clients a day old that hold nothing", async () => {
    await grant();
    const idle = await oauth.clientsStore.registerClient!({ redirect_uris: [REDIRECT], client_name: "Idle" });
    nowMs += 23 * HOUR_MS;
    // The request, the code and the access token (an hour); the refresh token lives a day, and both clients are younger.
    expect(await oauth.purgeExpired()).to.equal(3);
    nowMs += 2 * HOUR_MS;
    // The refresh token, then both clients: neither holds anything any more.
    expect(await oauth.purgeExpired()).to.equal(3);
    expect(await oauth.clientsStore.getClient(idle.client_id)).to.equal(undefined);
  });

  it("bounds what anyone can make it store: registered clients and waiting requests", async () => {
    const small = new McpOAuth(
      db,
      keys,
      { accessTokenTtlMs: HOUR_MS, refreshTokenTtlMs: HOUR_MS, clientsMax: 2, requestsMax: 1 },
      () => nowMs,
    );
    await small.clientsStore.registerClient!({ redirect_uris: [REDIRECT] });
    const refused = await Promise.resolve(small.clientsStore.registerClient!({ redirect_uris: [REDIRECT] })).catch(
      (error: { errorCode: string }) => error.errorCode,
    );
    expect(refused).to.equal("too_many_requests");
    const { res } = redirectRecorder();
    const params = { codeChallenge: challengeOf("y".repeat(43)), redirectUri: REDIRECT };
    await small.authorize(client, params, res);
    const second = await small.authorize(client, params, res).catch((error: { errorCode: string }) => error.errorCode);
    expect(second).to.equal("temporarily_unavailable");
  });
});
