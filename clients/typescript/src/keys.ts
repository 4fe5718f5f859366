// ---- Keys made by code (the provisioning API): client.keys ------------------------------------------------------
//
// POST, GET, PATCH and DELETE /v1/keys with a key that has the keys:manage scope (docs/keys.md in the gateway's
// repository). Kept in this file of its own, apart from the call path.

import type { TransportConfig, TransportRequest } from "./transport";
import { send } from "./transport";
import type { ApiKey, CreatedApiKey, CreateKeyParams, RequestOptions, UpdateKeyParams } from "./types";

/** The body the API takes for `params`: its field names, a Date as ISO 8601, undefined fields left out. */
function keyBody(params: CreateKeyParams | UpdateKeyParams): Record<string, unknown> {
  const expiresAt = params.expiresAt instanceof Date ? params.expiresAt.toISOString() : params.expiresAt;
  const body: Record<string, unknown> = {
    name: params.name,
    spend_limit_usd: params.spendLimitUsd,
    spend_limit_period: params.spendLimitPeriod,
    scopes: params.scopes,
    allowed_skills: params.allowedSkills,
    expires_at: expiresAt,
    metadata: params.metadata,
  };
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
}

const keyPath = (id: string) => `/v1/keys/${encodeURIComponent(id)}`;

/**
 * `client.keys`: the account's API keys, managed from code with a key that has `keys:manage` (or from a dashboard
 * session's cookie, in a browser). A keys:manage key makes only keys no wider than itself: never `keys:manage` or
 * `funds:withdraw`, and within its own allowed skills, expiry and spending limit (403 `authority_exceeded` otherwise).
 *
 * `create` and `revoke` are sent once, never retried: a create repeated after a lost answer would make a second key
 * (list the keys to see whether the first was made), and a revoke repeated would answer 404. `list` and `update`
 * are retried as reads are: the same PATCH twice changes the key the same way.
 */
export class Keys {
  constructor(private readonly transport: TransportConfig) {}

  /** POST /v1/keys: a new key; its whole secret is in `key`, this once. */
  async create(params: CreateKeyParams = {}, options: RequestOptions = {}): Promise<CreatedApiKey> {
    return (await this.request({ method: "POST", path: "/v1/keys", body: keyBody(params), maxRetries: 0 }, options)) as CreatedApiKey;
  }

  /** GET /v1/keys: the account's live keys, without their secrets. */
  async list(options: RequestOptions = {}): Promise<ApiKey[]> {
    return (await this.request({ method: "GET", path: "/v1/keys" }, options)) as ApiKey[];
  }

  /**
   * PATCH /v1/keys/:id: changes the fields given (`null` removes a limit, the skill list, the expiry, the metadata),
   * all in one transaction, in effect at the key's next request; `metadata` replaces the whole map.
   */
  async update(id: string, params: UpdateKeyParams, options: RequestOptions = {}): Promise<ApiKey> {
    return (await this.request({ method: "PATCH", path: keyPath(id), body: keyBody(params) }, options)) as ApiKey;
  }

  /** DELETE /v1/keys/:id: revokes the key at once; its next request gets 401. */
  async revoke(id: string, options: RequestOptions = {}): Promise<{ id: string; revoked: true }> {
    return (await this.request({ method: "DELETE", path: keyPath(id), maxRetries: 0 }, options)) as { id: string; revoked: true };
  }

  private async request(request: TransportRequest, options: RequestOptions): Promise<unknown> {
    const response = await send(this.transport, { ...request, signal: options.signal, timeoutMs: options.timeoutMs });
    return response.body.data;
  }
}
