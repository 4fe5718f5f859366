import { createHash, randomBytes } from "node:crypto";
import { expect } from "chai";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describeEachEngine } from "../helpers/engines";
import { type TestStack, startStack } from "../helpers/gateway";
import { MemoryOAuthClient } from "../helpers/mcp-oauth-client";
import { type TestSession, send, sessionFor } from "../helpers/session";

const REDIRECT = "http://127.0.0.1:9/callback";

/** The official SDK client on /mcp with `provider` for OAuth; undefined when it stopped for the person's consent. */
async function connect(
  stack: TestStack,
  provider: MemoryOAuthClient,
): Promise<{ client?: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), { authProvider: provider });
  const client = new Client({ name: "oauth-test", version: "1.0.0" });
  try {
    await client.connect(transport);
    return { client, transport };
  } catch (error) {
    if (error instanceof UnauthorizedError) return { transport };
    throw error;
  }
}

/** Follows the authorization URL as a browser would, to the dashboard's consent page; the request id it names. */
async function consentRequestOf(url: URL): Promise<string> {
  const res = await fetch(url, { redirect: "manual" });
  expect(res.status).to.equal(302);
  const location = new URL(res.headers.get("location")!);
  expect(location.pathname).to.equal("/connect");
  return location.searchParams.get("request")!;
}

/** The person consents with `choice`; the code the redirect carries, and the grant's key id. */
async function approve(session: TestSession, requestId: string, choice: Record<string, unknown>) {
  const res = await session.request("POST", `/v1/oauth/requests/${requestId}/approve`, choice);
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  const back = new URL(res.body.data.redirect_to);
  return { code: back.searchParams.get("code")!, state: back.searchParams.get("state"), keyId: res.body.data.key_id as string, back };
}

/** The whole connection: discovery, registration, consent, token exchange; a connected client. */
async function connected(stack: TestStack, session: TestSession, provider: MemoryOAuthClient, choice: Record<string, unknown>) {
  const first = await connect(stack, provider);
  expect(first.client).to.equal(undefined);
  const { code, keyId } = await approve(session, await consentRequestOf(provider.lastAuthorizationUrl()), choice);
  await first.transport.finishAuth(code);
  const again = await connect(stack, provider);
  expect(again.client).to.not.equal(undefined);
  return { client: again.client!, keyId };
}

const text = (result: CallToolResult) => result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

describeEachEngine("OAuth 2.1 for the hosted MCP server", (engine) => {
  let stack: TestStack;
  let session: TestSession;
  let clients: Client[];
  /** How far the gateway's clock is ahead of the real one: a refresh token's replay is told from a retry by time. */
  let skewMs: number;
  beforeEach(async () => {
    skewMs = 0;
    stack = await startStack({ engine: engine.name, gateway: { now: () => Date.now() + skewMs } });
    const issued = await stack.gw.sessions.issue(stack.buyerId);
    session = sessionFor(stack, stack.buyerId, issued.token, issued.csrfToken);
    clients = [];
  });
  afterEach(async () => {
    for (const client of clients) await client.close();
    await stack.close();
  });

  describe("discovery", () => {
    it("answers /mcp without credentials 401 with WWW-Authenticate naming the resource metadata, in the envelope", async () => {
      const res = await stack.post("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: null });
      expect(res.status).to.equal(401);
      expect(res.headers.get("www-authenticate")).to.equal(
        `Bearer resource_metadata="${stack.url}/.well-known/oauth-protected-resource/mcp"`,
      );
      expect(res.body).to.deep.include({ success: false, code: "unauthorized" });
    });

    it('adds error="invalid_token" for a wrong key, an unknown token and an expired key', async () => {
      const wrongKey = await stack.post("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: "atom_typo" });
      const unknownToken = await stack.post("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: "sgat_nothing" });
      const expiring = await session.request("POST", "/v1/keys", { expires_at: new Date(Date.now() + 1_500).toISOString() });
      await new Promise((resolve) => setTimeout(resolve, 1_600));
      const expired = await stack.post("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: expiring.body.data.key });
      for (const [res, code] of [
        [wrongKey, "unauthorized"],
        [unknownToken, "unauthorized"],
        [expired, "key_expired"],
      ] as const) {
        expect(res.status).to.equal(401);
        expect(res.body.code).to.equal(code);
        expect(res.headers.get("www-authenticate")).to.match(
          new RegExp(
            `^Bearer error="invalid_token", error_description="[^"]+", resource_metadata="${stack.url}/\\.well-known/oauth-protected-resource/mcp"$`,
          ),
        );
      }
    });

    it("serves protected resource metadata (RFC 9728) and authorization server metadata (RFC 8414)", async () => {
      const resource = await send(`${stack.url}/.well-known/oauth-protected-resource/mcp`, "GET", {});
      expect(resource.status).to.equal(200);
      expect(resource.body).to.deep.include({ resource: `${stack.url}/mcp`, authorization_servers: [`${stack.url}/`] });
      const server = await send(`${stack.url}/.well-known/oauth-authorization-server`, "GET", {});
      expect(server.status).to.equal(200);
      expect(server.body).to.deep.include({
        issuer: `${stack.url}/`,
        authorization_endpoint: `${stack.url}/oauth/authorize`,
        token_endpoint: `${stack.url}/oauth/token`,
        registration_endpoint: `${stack.url}/oauth/register`,
        revocation_endpoint: `${stack.url}/oauth/revoke`,
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
      });
    });
  });

  describe("registration (RFC 7591)", () => {
    const register = (body: unknown) => send(`${stack.url}/oauth/register`, "POST", {}, body);

    it("registers a public client whatever authentication it asked for: no secret is issued or stored", async () => {
      const res = await register({
        client_name: "Claude",
        redirect_uris: ["https://claude.ai/api/mcp/auth_callback"],
        token_endpoint_auth_method: "client_secret_post",
      });
      expect(res.status).to.equal(201);
      expect(res.body).to.include({ client_name: "Claude", token_endpoint_auth_method: "none" });
      expect(res.body).to.not.have.property("client_secret");
      const row = await stack.gw.db.one<{ metadata: string }>("SELECT metadata FROM mcp_oauth_clients WHERE client_id = ?", [
        res.body.client_id,
      ]);
      expect(row!.metadata).to.not.contain("secret");
    });

    for (const [what, uri] of [
      ["http on a public host", "http://evil.example/callback"],
      ["a fragment", "https://app.example/cb#x"],
      ["a browser scheme", "file:///etc/passwd"],
    ] as const) {
      it(`refuses a redirect URI with ${what}`, async () => {
        const res = await register({ client_name: "x", redirect_uris: [uri] });
        expect(res.status).to.equal(400);
        expect(res.body.error).to.equal("invalid_client_metadata");
      });
    }

    it("refuses a client name with control characters", async () => {
      const res = await register({ client_name: "evil\u202e", redirect_uris: [REDIRECT] });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal("invalid_client_metadata");
    });
  });

  describe("the connection", () => {
    it("connects the official SDK client: registration, consent, PKCE code exchange, and paid calls within the consented limit", async () => {
      const provider = new MemoryOAuthClient(REDIRECT);
      const before = await stack.available();
      const { client, keyId } = await connected(stack, session, provider, {
        allowed_skills: ["echo"],
        spend_limit_usd: "0.0025",
        spend_limit_period: "day",
        expires_at: new Date(Date.now() + 7 * 86_400_000).toISOString(),
      });
      clients.push(client);
      expect(provider.saved!.access_token).to.match(/^sgat_/);
      expect(provider.saved!.refresh_token).to.match(/^sgrt_/);
      // Only the consented skills are tools.
      expect((await client.listTools()).tools.map((t) => t.name)).to.deep.equal(["echo"]);
      const first = (await client.callTool({ name: "echo", arguments: { n: 1 } })) as CallToolResult;
      expect(first.isError, text(first)).to.not.equal(true);
      const second = (await client.callTool({ name: "echo", arguments: { n: 2 } })) as CallToolResult;
      expect(second.isError, text(second)).to.not.equal(true);
      // $0.001 a call against $0.0025 a day: the third is refused, and costs nothing.
      const third = (await client.callTool({ name: "echo", arguments: { n: 3 } })) as CallToolResult;
      expect(third.isError).to.equal(true);
      expect((third.structuredContent as { code: string }).code).to.equal("key_spend_limit_reached");
      await stack.gw.db.durable();
      expect(before - (await stack.available())).to.equal(2_000n);

      // The grant is a calls-only key listed on API Keys, named for the client.
      const keys = await session.request("GET", "/v1/keys");
      const key = keys.body.data.find((k: { id: string }) => k.id === keyId);
      expect(key).to.deep.include({
        name: "Test MCP Client (MCP)",
        scopes: ["calls"],
        allowed_skills: ["echo"],
        spend_limit_period: "day",
      });
      expect(key.metadata).to.deep.include({ oauth_client: "Test MCP Client" });
      // Its tokens are stored as hashes only.
      const rows = await stack.gw.db.all<{ token_hash: string }>("SELECT token_hash FROM mcp_oauth_tokens");
      expect(rows.map((r) => r.token_hash)).to.include(createHash("sha256").update(provider.saved!.access_token).digest("hex"));
      expect(JSON.stringify(rows)).to.not.contain(provider.saved!.access_token);
    });

    it("keeps atom_ keys working on /mcp beside OAuth tokens", async () => {
      const client = new Client({ name: "key", version: "1" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${stack.key}` } },
        }),
      );
      clients.push(client);
      expect((await client.listTools()).tools.length).to.be.greaterThan(1);
    });

    it("refreshes: a new pair each time, the old refresh token used up, and a replayed one ends the grant", async () => {
      const provider = new MemoryOAuthClient(REDIRECT);
      const { client } = await connected(stack, session, provider, { spend_limit_usd: "1", spend_limit_period: "day" });
      clients.push(client);
      const clientId = provider.registration!.client_id;
      const refresh = async (token: string) =>
        send(
          `${stack.url}/oauth/token`,
          "POST",
          { "content-type": "application/x-www-form-urlencoded" },
          new URLSearchParams({ grant_type: "refresh_token", refresh_token: token, client_id: clientId }).toString(),
        );
      const firstRefresh = provider.saved!.refresh_token!;
      const rotated = await refresh(firstRefresh);
      expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);
      expect(rotated.body.refresh_token).to.not.equal(firstRefresh);
      expect(rotated.body.access_token).to.match(/^sgat_/);
      // The new access token works on /mcp.
      const listed = await stack.post(
        "/mcp",
        { jsonrpc: "2.0", id: 1, method: "tools/list" },
        { key: rotated.body.access_token, headers: { accept: "application/json, text/event-stream" } },
      );
      expect(listed.status).to.equal(200);
      // The first refresh token again at once: a retry (two refreshes at once, a lost answer), refused without harm.
      const retried = await refresh(firstRefresh);
      expect(retried.status).to.equal(400);
      expect(retried.body.error_description).to.contain("rotated a moment ago");
      const still = await stack.post(
        "/mcp",
        { jsonrpc: "2.0", id: 1, method: "tools/list" },
        { key: rotated.body.access_token, headers: { accept: "application/json, text/event-stream" } },
      );
      expect(still.status).to.equal(200);
      // The same later: a replay, which ends the grant (the rotated pair stops too).
      skewMs = 31_000;
      const replay = await refresh(firstRefresh);
      expect(replay.status).to.equal(400);
      expect(replay.body.error).to.equal("invalid_grant");
      const after = await stack.post("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: rotated.body.access_token });
      expect(after.status).to.equal(401);
      expect((await refresh(rotated.body.refresh_token)).status).to.equal(400);
    });

    it("ends every token of a grant whose key is revoked on API Keys", async () => {
      const provider = new MemoryOAuthClient(REDIRECT);
      const { client, keyId } = await connected(stack, session, provider, { spend_limit_usd: "1", spend_limit_period: "day" });
      clients.push(client);
      expect((await session.request("DELETE", `/v1/keys/${keyId}`)).status).to.equal(200);
      let refused: unknown;
      try {
        await client.listTools();
      } catch (error) {
        refused = error;
      }
      expect(refused).to.be.instanceOf(Error);
      const res = await stack.post("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, { key: provider.saved!.access_token });
      expect(res.status).to.equal(401);
      expect(res.headers.get("www-authenticate")).to.contain('error="invalid_token"');
      const refresh = await send(
        `${stack.url}/oauth/token`,
        "POST",
        { "content-type": "application/x-www-form-urlencoded" },
        new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: provider.saved!.refresh_token!,
          client_id: provider.registration!.client_id,
        }).toString(),
      );
      expect(refresh.status).to.equal(400);
    });

    it("refuses a code for another resource without using it up, and a code exchanged twice ends its grant", async () => {
      const provider = new MemoryOAuthClient(REDIRECT);
      const first = await connect(stack, provider);
      const requestId = await consentRequestOf(provider.lastAuthorizationUrl());
      const { code, keyId } = await approve(session, requestId, { spend_limit_usd: null });
      const exchange = (resource: string, verifier = provider.codeVerifier()) =>
        send(
          `${stack.url}/oauth/token`,
          "POST",
          { "content-type": "application/x-www-form-urlencoded" },
          new URLSearchParams({
            grant_type: "authorization_code",
            code,
            code_verifier: verifier,
            redirect_uri: REDIRECT,
            client_id: provider.registration!.client_id,
            resource,
          }).toString(),
        );
      const elsewhere = await exchange("https://other.example/mcp");
      expect(elsewhere.status).to.equal(400);
      expect(elsewhere.body.error).to.equal("invalid_target");
      // Refused, the code is still good: the client's exchange with its own resource works (a query kept from the
      // connector URL names the same resource).
      await first.transport.finishAuth(code);
      expect(provider.saved!.access_token).to.match(/^sgat_/);
      // The used code without its verifier (leaked from a URL): refused, and the connection stands.
      expect((await exchange(`${stack.url}/mcp?skills=echo`, "x".repeat(43))).body.error).to.equal("invalid_grant");
      expect((await stack.gw.keys.get(keyId))!.revokedAtMs).to.equal(null);
      // With its verifier: a replay, and the grant's key is revoked.
      expect((await exchange(`${stack.url}/mcp?skills=echo`)).status).to.equal(400);
      expect((await stack.gw.keys.get(keyId))!.revokedAtMs).to.not.equal(null);
    });

    it("answers 503 itself when too many requests wait for consent, never redirecting to the client", async () => {
      const full = await startStack({ engine: engine.name, config: { mcpOAuthRequestsMax: 1 } });
      try {
        const registered = await send(`${full.url}/oauth/register`, "POST", {}, { redirect_uris: ["https://evil.example/phish"] });
        const url = `${full.url}/oauth/authorize?${new URLSearchParams({ client_id: registered.body.client_id, response_type: "code", code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", code_challenge_method: "S256" })}`;
        expect((await fetch(url, { redirect: "manual" })).status).to.equal(302);
        const refused = await fetch(url, { redirect: "manual" });
        expect(refused.status).to.equal(503);
        expect(refused.headers.get("location")).to.equal(null);
        expect(((await refused.json()) as { error: string }).error).to.equal("temporarily_unavailable");
      } finally {
        await full.close();
      }
    });

    it("answers a malformed authorization request 400 itself, never redirecting to the client", async () => {
      const registered = await send(
        `${stack.url}/oauth/register`,
        "POST",
        {},
        { client_name: "x", redirect_uris: ["https://evil.example/phish"] },
      );
      const base = {
        client_id: registered.body.client_id,
        response_type: "code",
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
      };
      for (const params of [
        { client_id: base.client_id, response_type: "code" },
        { ...base, code_challenge_method: "plain" },
        { ...base, resource: "https://elsewhere.example/mcp" },
        { ...base, scope: "admin" },
      ]) {
        const res = await fetch(`${stack.url}/oauth/authorize?${new URLSearchParams(params as Record<string, string>)}`, {
          redirect: "manual",
        });
        expect(res.status, JSON.stringify(params)).to.equal(400);
        expect(res.headers.get("location")).to.equal(null);
      }
      // A good one goes to the consent page, on the gateway's own origin.
      const good = await fetch(`${stack.url}/oauth/authorize?${new URLSearchParams(base)}`, { redirect: "manual" });
      expect(good.status).to.equal(302);
      expect(good.headers.get("location")).to.match(new RegExp(`^${stack.url}/connect\\?request=sgar_`));
    });

    it("refuses a wrong PKCE verifier, and a refused consent sends access_denied back with the state", async () => {
      const provider = new MemoryOAuthClient(REDIRECT);
      await connect(stack, provider);
      const { code } = await approve(session, await consentRequestOf(provider.lastAuthorizationUrl()), {
        spend_limit_usd: "1",
        spend_limit_period: "total",
      });
      const wrong = await send(
        `${stack.url}/oauth/token`,
        "POST",
        { "content-type": "application/x-www-form-urlencoded" },
        new URLSearchParams({
          grant_type: "authorization_code",
          code,
          code_verifier: randomBytes(32).toString("base64url"),
          client_id: provider.registration!.client_id,
        }).toString(),
      );
      expect(wrong.status).to.equal(400);
      expect(wrong.body.error).to.equal("invalid_grant");

      const again = new MemoryOAuthClient(REDIRECT);
      await connect(stack, again);
      const url = again.lastAuthorizationUrl();
      const requestId = await consentRequestOf(url);
      const shown = await session.request("GET", `/v1/oauth/requests/${requestId}`);
      expect(shown.status).to.equal(200);
      expect(shown.body.data).to.include({ client_name: "Test MCP Client", redirect_uri: REDIRECT });
      const denied = await session.request("POST", `/v1/oauth/requests/${requestId}/deny`);
      const back = new URL(denied.body.data.redirect_to);
      expect(back.searchParams.get("error")).to.equal("access_denied");
      expect(back.searchParams.get("state")).to.equal(url.searchParams.get("state"));
      // A request is answered once.
      expect((await session.request("POST", `/v1/oauth/requests/${requestId}/approve`, { spend_limit_usd: null })).status).to.equal(404);
    });

    it("needs a signed-in session with its CSRF token to consent", async () => {
      const provider = new MemoryOAuthClient(REDIRECT);
      await connect(stack, provider);
      const requestId = await consentRequestOf(provider.lastAuthorizationUrl());
      const anonymous = await send(`${stack.url}/v1/oauth/requests/${requestId}/approve`, "POST", {}, { spend_limit_usd: null });
      expect(anonymous.status).to.equal(401);
      const noCsrf = await session.request("POST", `/v1/oauth/requests/${requestId}/approve`, { spend_limit_usd: null }, { csrf: false });
      expect(noCsrf.status).to.equal(403);
      expect(noCsrf.body.code).to.equal("csrf_failed");
    });
  });
});
