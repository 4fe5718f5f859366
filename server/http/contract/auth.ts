import { z } from "zod";
import { isAddress } from "viem";
import { normalizeEmail } from "../../identity/email";
import { dataEnvelope, hexAddress, isoDate, operation } from "./common";

/**
 * Signing in: e-mail magic links, Sign-In With Ethereum, GitHub and Google, and signing out
 * (server/http/routes/auth-*.ts, session.ts). Every sign-in POST is same-origin JSON
 * (server/http/sign-in.ts): 403 origin_refused, 415 unsupported_media_type otherwise.
 */

const switchAccount = z
  .boolean({ error: "switch_account must be true or false." })
  .nullable()
  .optional()
  .meta({ description: "true to leave the browser's session for the identity's account." });

/** POST /auth/email/start's body (refused as invalid_input). */
export const emailStartBody = z.object(
  {
    email: z
      .string({ error: "email must be an e-mail address." })
      .transform((email, ctx) => {
        const normalized = normalizeEmail(email);
        if (!normalized) ctx.addIssue({ code: "custom", message: "email must be an e-mail address." });
        return normalized ?? z.NEVER;
      })
      .meta({ override: { type: "string", format: "email" } }),
  },
  { error: "Body must be a JSON object." },
);

/** POST /auth/email/preview's body: a token that is not a string is an unusable link, answered as one. */
export const emailPreviewBody = z.object(
  {
    token: z
      .unknown()
      .optional()
      .meta({ override: { type: "string" } }),
  },
  { error: "Body must be a JSON object." },
);

/** POST /auth/email/verify's body. */
export const emailVerifyBody = z.object(
  {
    token: z
      .unknown()
      .optional()
      .meta({ override: { type: "string" } }),
    switch_account: switchAccount,
  },
  { error: "Body must be a JSON object." },
);

/** GET /auth/siwe/nonce's query: with an address, the message to sign comes ready made. */
export const siweNonceQuery = z.object({
  address: z
    .string({ error: "address must be a 0x-prefixed 20-byte hex address." })
    .refine((value) => isAddress(value, { strict: false }), { error: "address must be a 0x-prefixed 20-byte hex address." })
    .optional(),
});

const SIWE_SHAPE = "Send { message, signature }: the EIP-4361 message as signed, and its signature (0x hex).";

/** POST /auth/siwe/verify's body (a missing message or signature is refused as unauthorized). */
export const siweVerifyBody = z.object(
  {
    message: z.string({ error: SIWE_SHAPE }).meta({ description: "The EIP-4361 message, exactly as signed." }),
    signature: z.string({ error: SIWE_SHAPE }).meta({ description: "Its signature, 0x hex." }),
    switch_account: switchAccount,
  },
  { error: "Body must be a JSON object." },
);

const SIGN_IN_POST_ERRORS = ["origin_refused", "unsupported_media_type"] as const;
const signedIn = { account_id: z.string(), created: z.boolean(), linked: z.boolean(), switched: z.boolean() };
const redirect = (status: number, description: string) => ({ status, description, headers: { location: "Where to go next." } });

/** GET /auth/siwe/nonce's answer. */
export const siweNonceView = z.strictObject({
  nonce: z.string(),
  expires_at: isoDate,
  domain: z.string(),
  uri: z.string(),
  chain_id: z.number().int(),
  message: z.string().optional(),
});
/** POST /auth/siwe/verify's answer. */
export const siweSignedInView = z.strictObject({ ...signedIn, address: hexAddress, csrf_token: z.string() });
/** POST /auth/email/verify's answer. */
export const emailSignedInView = z.strictObject(signedIn);

export const authOperations = [
  operation({
    method: "post",
    path: "/auth/email/start",
    tag: "Sign-in",
    summary: "Mail a sign-in link",
    description: "Always the same answer, whoever the address belongs to.",
    auth: "none",
    body: emailStartBody,
    responses: [
      {
        status: 200,
        description: "Sent, if the address can receive mail.",
        schema: dataEnvelope(z.strictObject({ sent: z.literal(true), message: z.string() })),
      },
    ],
    errors: [...SIGN_IN_POST_ERRORS, "invalid_input", "csrf_failed"],
  }),
  operation({
    method: "post",
    path: "/auth/email/preview",
    tag: "Sign-in",
    summary: "What a sign-in link would do, without using it",
    auth: "none",
    body: emailPreviewBody,
    responses: [
      {
        status: 200,
        description: "The link's address and what verifying it would do.",
        schema: dataEnvelope(
          z.strictObject({
            email: z.string(),
            expires_at: isoDate,
            signed_in: z.boolean(),
            action: z.enum(["link", "sign_up", "sign_in"]).nullable(),
            refusal: z.string().nullable(),
            switch_action: z.enum(["sign_up", "sign_in"]).nullable(),
          }),
        ),
      },
    ],
    errors: [...SIGN_IN_POST_ERRORS, "sign_in_failed"],
  }),
  operation({
    method: "post",
    path: "/auth/email/verify",
    tag: "Sign-in",
    summary: "Use a sign-in link: sign in (or link the address), session cookies set",
    auth: "none",
    body: emailVerifyBody,
    responses: [{ status: 200, description: "Signed in.", schema: dataEnvelope(emailSignedInView) }],
    errors: [...SIGN_IN_POST_ERRORS, "sign_in_failed", "identity_taken", "session_exists", "csrf_failed"],
  }),
  // A browser that opens one of the two POST addresses above (a link pasted by hand) is sent to the link's page.
  ...(["verify", "preview"] as const).map((step) =>
    operation({
      method: "get",
      path: `/auth/email/${step}`,
      tag: "Sign-in",
      summary: `A browser that opens /auth/email/${step}: sent to the link's page`,
      description:
        "Uses nothing. A browser navigation (Accept prefers text/html) is sent to /auth/email/callback?token=…, the page a mailed link opens; any other client gets the 404 envelope.",
      auth: "none",
      query: z.object({ token: z.string().optional() }),
      responses: [redirect(303, "A browser, to the link's page (/auth/email/callback).")],
      errors: ["not_found"],
    }),
  ),
  operation({
    method: "get",
    path: "/auth/siwe/nonce",
    tag: "Sign-in",
    summary: "A single-use nonce for Sign-In With Ethereum",
    auth: "none",
    query: siweNonceQuery,
    responses: [
      {
        status: 200,
        description: "The nonce, and what the message must name; with ?address=, the message itself.",
        schema: dataEnvelope(siweNonceView),
      },
    ],
    errors: ["invalid_request"],
  }),
  operation({
    method: "post",
    path: "/auth/siwe/verify",
    tag: "Sign-in",
    summary: "Sign in with a signed EIP-4361 message, session cookies set",
    auth: "none",
    body: siweVerifyBody,
    responses: [
      {
        status: 200,
        description: "Signed in (or the address linked to the open session).",
        schema: dataEnvelope(siweSignedInView),
      },
    ],
    errors: [...SIGN_IN_POST_ERRORS, "unauthorized", "identity_taken", "chain_unavailable", "chain_not_configured", "csrf_failed"],
  }),
  ...(["github", "google"] as const).flatMap((provider) => [
    operation({
      method: "get",
      path: `/auth/${provider}/start`,
      tag: "Sign-in",
      summary: `Start a ${provider === "github" ? "GitHub" : "Google"} sign-in (a browser navigation)`,
      auth: "none",
      responses: [redirect(302, "To the provider; the state cookie set."), redirect(303, "A browser, to the page explaining a refusal.")],
      errors: ["not_found", "origin_refused", "sign_in_unavailable"],
    }),
    operation({
      method: "get",
      path: `/auth/${provider}/callback`,
      tag: "Sign-in",
      summary: `Where ${provider === "github" ? "GitHub" : "Google"} sends the browser back`,
      auth: "none",
      query: z.object({ code: z.string().optional(), state: z.string().optional(), error: z.string().optional() }),
      responses: [redirect(303, "Signed in, to the dashboard; or a browser, to the page explaining a refusal.")],
      errors: ["not_found", "sign_in_failed", "sign_in_unavailable", "identity_taken", "session_exists"],
    }),
  ]),
  operation({
    method: "post",
    path: "/auth/logout",
    tag: "Sign-in",
    summary: "End the session",
    auth: "session",
    responses: [{ status: 200, description: "Signed out.", schema: dataEnvelope(z.strictObject({ signed_out: z.literal(true) })) }],
    errors: [],
  }),
];
