import path from "node:path";
import { DEFAULT_BASE_URL, SkillGateway } from "@skill-gateway/sdk";
import { CliError, EXIT } from "./errors";
import { MANIFEST_FILE } from "./manifest";

/**
 * The CLI's configuration, in one place: flags first, then the environment, then defaults.
 * Nothing else reads process.env.
 */
export interface GlobalOptions {
  apiKey?: string;
  url?: string;
  manifest?: string;
  json?: boolean;
}

export interface CliConfig {
  apiKey: string | undefined;
  /** Undefined: the SDK's default (http://127.0.0.1:8787). */
  baseUrl: string | undefined;
  manifestFile: string;
  json: boolean;
}

export function resolveConfig(options: GlobalOptions, env: NodeJS.ProcessEnv, cwd: string): CliConfig {
  const nonEmpty = (value: string | undefined) => (value === undefined || value === "" ? undefined : value);
  const baseUrl = nonEmpty(options.url) ?? nonEmpty(env.SKILL_GATEWAY_URL);
  if (baseUrl !== undefined && !/^https?:\/\/[^\s]+$/i.test(baseUrl)) {
    throw new CliError(`The gateway URL ${JSON.stringify(baseUrl)} is not an http(s) URL.`, EXIT.usage, "invalid_url");
  }
  return {
    apiKey: nonEmpty(options.apiKey) ?? nonEmpty(env.SKILL_GATEWAY_API_KEY),
    baseUrl,
    manifestFile: path.resolve(cwd, options.manifest ?? MANIFEST_FILE),
    json: options.json === true,
  };
}

/**
 * A client for the marketplace (no key needed). The URL is always passed, so the SDK's own
 * environment fallback never applies and the environment is read here only.
 */
export function marketplaceClient(config: CliConfig): SkillGateway {
  return new SkillGateway({ apiKey: config.apiKey, baseUrl: config.baseUrl ?? DEFAULT_BASE_URL });
}

/** A client for calls and account reads: an API key is required. */
export function accountClient(config: CliConfig): SkillGateway {
  if (config.apiKey === undefined) {
    throw new CliError("No API key: set SKILL_GATEWAY_API_KEY or pass --api-key atom_...", EXIT.auth, "missing_api_key");
  }
  return marketplaceClient(config);
}
