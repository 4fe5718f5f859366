import { z } from "zod";
import { dataEnvelope, isoDate, operation } from "./common";

/** API keys of the signed-in account (server/http/routes/keys.ts). */

/** Longest key name. */
export const MAX_KEY_NAME_CHARS = 64;

const NAME_MESSAGE = `name must be a string of at most ${MAX_KEY_NAME_CHARS} characters.`;

/** POST /v1/keys's body: an optional name (an empty body names the key ""). */
export const createKeyBody = z.object(
  {
    name: z
      .string({ error: NAME_MESSAGE })
      .max(MAX_KEY_NAME_CHARS, { error: NAME_MESSAGE })
      .optional()
      .meta({ description: "A label for the key, trimmed." }),
  },
  { error: "Body must be a JSON object." },
);

export const keyView = z
  .strictObject({
    id: z.string(),
    prefix: z.string().meta({ description: "The key's visible start, to recognise it by." }),
    name: z.string(),
    created_at: isoDate.nullable(),
    last_used_at: isoDate.nullable(),
  })
  .meta({ id: "ApiKey" });

export const keyOperations = [
  operation({
    method: "post",
    path: "/v1/keys",
    tag: "Keys",
    summary: "Create an API key",
    description: "The whole key (atom_...) is in this answer only; the gateway keeps its hash.",
    auth: "session",
    body: createKeyBody,
    bodyOptional: true,
    responses: [
      {
        status: 201,
        description: "The key, shown this once.",
        schema: dataEnvelope(keyView.extend({ key: z.string().regex(/^atom_/) })),
      },
    ],
    errors: [],
  }),
  operation({
    method: "get",
    path: "/v1/keys",
    tag: "Keys",
    summary: "The account's live keys",
    auth: "session",
    responses: [{ status: 200, description: "Live keys, without their secret.", schema: dataEnvelope(z.array(keyView)) }],
    errors: [],
  }),
  operation({
    method: "delete",
    path: "/v1/keys/{id}",
    tag: "Keys",
    summary: "Revoke a key at once",
    auth: "session",
    params: z.object({ id: z.string() }),
    responses: [
      {
        status: 200,
        description: "Revoked: the next call with it gets 401.",
        schema: dataEnvelope(z.strictObject({ id: z.string(), revoked: z.literal(true) })),
      },
    ],
    errors: ["not_found"],
  }),
];
