import { z } from "zod";
import { dataEnvelope, isoDate, operation } from "./common";
import { allowedSkillsField, expiresAtField, spendLimitPeriod, spendLimitUsd } from "./keys";

/**
 * The consent step of the hosted MCP server's OAuth (server/identity/mcp-oauth.ts, server/http/routes/mcp-oauth.ts):
 * what the dashboard's /connect page reads and sends. The OAuth endpoints themselves (/oauth/authorize, /oauth/token,
 * /oauth/register, /oauth/revoke and the two .well-known documents) speak OAuth's own formats (RFC 6749, 7591, 7009,
 * 8414, 9728), not the gateway's envelope, and are described in docs/mcp.md.
 */

export const UNKNOWN_REQUEST = "This connection request is unknown, used or expired: start connecting again from your MCP client.";

/** A request's id, as the authorization endpoint put it in the /connect link. */
export const connectParams = z.object({
  requestId: z
    .string({ error: UNKNOWN_REQUEST })
    .regex(/^sgar_[1-9A-HJ-NP-Za-km-z]{32,48}$/, { error: UNKNOWN_REQUEST })
    .meta({ description: "The request id of the /connect?request= link." }),
});

const BODY_FIELDS = ["allowed_skills", "spend_limit_usd", "spend_limit_period", "expires_at"];

/** What the person consents to: the grant's key gets exactly these limits (and the calls scope alone). */
export const approveBody = z.strictObject(
  {
    allowed_skills: allowedSkillsField.optional(),
    spend_limit_usd: spendLimitUsd.meta({
      description: 'What the client may spend per period, in USD ("5.00"); null for no limit (the dashboard always proposes one).',
    }),
    spend_limit_period: spendLimitPeriod.optional().meta({ description: "Required with spend_limit_usd." }),
    expires_at: expiresAtField.optional(),
  },
  {
    error: (issue) =>
      issue.code === "unrecognized_keys"
        ? `Unknown field ${JSON.stringify(issue.keys?.[0] ?? "")}: a consent's fields are ${BODY_FIELDS.join(", ")}.`
        : "Body must be a JSON object.",
  },
);

/** GET /v1/oauth/requests/:requestId's answer: the waiting request, for the consent page. */
export const requestView = z.strictObject({
  client_id: z.string(),
  client_name: z.string().meta({ description: 'The name the client registered with; "" when it gave none.' }),
  client_uri: z.string().nullable(),
  redirect_uri: z.string().meta({ description: "Where the browser is sent back with the answer." }),
  expires_at: isoDate.meta({ description: "When the request stops waiting for an answer." }),
});

/** POST .../deny's answer. */
export const redirectView = z.strictObject({
  redirect_to: z.string().meta({ description: "The client's redirect URI with the answer: the page sends the browser there." }),
});

/** POST .../approve's answer. */
export const approvedView = redirectView.extend({ key_id: z.string().meta({ description: "The grant's key (API Keys)." }) });

export const mcpOAuthOperations = [
  operation({
    method: "get",
    path: "/v1/oauth/requests/{requestId}",
    tag: "MCP",
    summary: "An MCP client's request to connect, as the consent page shows it",
    auth: "session",
    params: connectParams,
    responses: [{ status: 200, description: "The waiting request.", schema: dataEnvelope(requestView) }],
    errors: ["not_found"],
  }),
  operation({
    method: "post",
    path: "/v1/oauth/requests/{requestId}/approve",
    tag: "MCP",
    summary: "Connect the MCP client: a calls-only key with these limits backs its tokens",
    description:
      'Makes the grant\'s API key (scopes ["calls"], the skills, spending limit and expiry given, named for the client and listed on API Keys; revoking it disconnects the client) and an authorization code for the client, in one transaction.',
    auth: "session",
    params: connectParams,
    body: approveBody,
    responses: [
      {
        status: 200,
        description: "Consented: the client's redirect URI with the code.",
        schema: dataEnvelope(approvedView),
      },
    ],
    errors: ["not_found"],
  }),
  operation({
    method: "post",
    path: "/v1/oauth/requests/{requestId}/deny",
    tag: "MCP",
    summary: "Refuse the MCP client's request to connect",
    auth: "session",
    params: connectParams,
    responses: [
      { status: 200, description: "Refused: the client's redirect URI with error=access_denied.", schema: dataEnvelope(redirectView) },
    ],
    errors: ["not_found"],
  }),
];
