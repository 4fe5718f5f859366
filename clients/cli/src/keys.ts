// ---- `skill-gateway keys`: keys made by code (the provisioning API) -----------------------------------------------
//
// create, list, update and revoke the account's API keys with a key that has the keys:manage scope, through the SDK's
// client.keys. Kept in this file of its own, apart from the call path; cli.ts adds the command group in one line.

import type { Command } from "commander";
import type { ApiKey, CreateKeyParams, KeyScope, SpendPeriod, UpdateKeyParams } from "@skill-gateway/sdk";
import type { CliConfig } from "./config";
import { accountClient } from "./config";
import { CliError, EXIT } from "./errors";

const SCOPES: readonly KeyScope[] = ["calls", "usage:read", "funds:withdraw", "keys:manage"];
const PERIODS: readonly SpendPeriod[] = ["day", "month", "total"];
const DAY_MS = 86_400_000;

const usage = (message: string) => new CliError(message, EXIT.usage, "invalid_option");

/** --scopes calls,usage:read: each from the vocabulary. */
export function parseScopes(text: string): KeyScope[] {
  const scopes = text.split(/[\s,]+/).filter(Boolean);
  const unknown = scopes.find((scope) => !(SCOPES as readonly string[]).includes(scope));
  if (unknown !== undefined || scopes.length === 0)
    throw usage(`--scopes must be a comma-separated list of ${SCOPES.join(", ")}${unknown ? `, not ${JSON.stringify(unknown)}` : ""}.`);
  return scopes as KeyScope[];
}

/** --skills echo,weather-now: slugs or UUIDs. */
export function parseSkills(text: string): string[] {
  const skills = text.split(/[\s,]+/).filter(Boolean);
  if (skills.length === 0) throw usage("--skills must name at least one skill (slug or UUID); --all-skills lifts the restriction.");
  return skills;
}

/**
 * --expires: an ISO 8601 time with its offset (2026-12-31T18:00:00Z), or a day (2026-12-31: the key stops at the end
 * of that UTC day, as on the dashboard), or a number of days from now (30d).
 */
export function parseExpiry(text: string, nowMs: number = Date.now()): string {
  const days = /^(\d{1,3})d$/.exec(text);
  if (days) return new Date(nowMs + Number(days[1]) * DAY_MS).toISOString();
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    const startMs = Date.parse(`${text}T00:00:00Z`);
    if (!Number.isNaN(startMs)) return new Date(startMs + DAY_MS).toISOString();
  }
  if (/^\d{4}-\d{2}-\d{2}T.*(Z|[+-]\d{2}:\d{2})$/.test(text) && !Number.isNaN(Date.parse(text))) return text;
  throw usage(
    `--expires must be a day (2026-12-31), a time with its offset (2026-12-31T18:00:00Z) or days from now (30d), not ${JSON.stringify(text)}.`,
  );
}

/** --meta name=value, repeated: collected into one map (a name given twice is a mistake worth telling). */
export function collectMeta(entry: string, previous: Record<string, string> = {}): Record<string, string> {
  const at = entry.indexOf("=");
  const name = at < 0 ? "" : entry.slice(0, at).trim();
  if (name === "") throw usage(`--meta takes name=value (e.g. --meta agent=researcher-7), not ${JSON.stringify(entry)}.`);
  if (Object.hasOwn(previous, name)) throw usage(`--meta ${name} is given twice.`);
  return { ...previous, [name]: entry.slice(at + 1) };
}

/** The options the create and update commands share, as commander hands them over. */
interface KeyOptions {
  name?: string;
  scopes?: KeyScope[];
  skills?: string[];
  allSkills?: boolean;
  expires?: string | false;
  limit?: string | false;
  period?: SpendPeriod;
  meta?: Record<string, string> | false;
}

/** The SDK's parameters for what the options say; a lift (--all-skills, --no-expiry, --no-limit, --no-meta) is null. */
export function keyParams(options: KeyOptions): CreateKeyParams & UpdateKeyParams {
  if (options.skills !== undefined && options.allSkills) throw usage("--skills and --all-skills say opposite things: give one.");
  const params: CreateKeyParams = {};
  if (options.name !== undefined) params.name = options.name;
  if (options.scopes !== undefined) params.scopes = options.scopes;
  if (options.skills !== undefined) params.allowedSkills = options.skills;
  if (options.allSkills) params.allowedSkills = null;
  if (options.expires !== undefined) params.expiresAt = options.expires === false ? null : options.expires;
  if (options.limit !== undefined) params.spendLimitUsd = options.limit === false ? null : options.limit;
  if (options.period !== undefined) params.spendLimitPeriod = options.period;
  if (options.meta !== undefined) params.metadata = options.meta === false ? null : options.meta;
  return params;
}

/** One key as `keys list` prints it: id, name, what it may do, its limit, its expiry and its metadata. */
export function keyRow(key: ApiKey): string[] {
  const limit = key.spend_limit_usd === null ? "none" : `$${key.spend_limit_usd}/${key.spend_limit_period}`;
  return [
    key.id,
    key.name || "-",
    key.scopes.join(","),
    key.allowed_skills === null ? "all" : key.allowed_skills.join(","),
    limit,
    key.expires_at ?? "never",
    Object.entries(key.metadata)
      .map(([name, value]) => `${name}=${value}`)
      .join(" ") || "-",
  ];
}

/** The options of create and update; `lifts` adds the ones that remove a restriction (update only). */
function withKeyOptions(command: Command, lifts: boolean): Command {
  command
    .option("--name <name>", "a label for the key")
    .option("--scopes <list>", `what the key may do: ${SCOPES.join(", ")} (comma-separated)`, parseScopes)
    .option("--skills <list>", "only these skills, by slug or UUID (comma-separated)", parseSkills)
    .option("--expires <when>", "when it stops: a day (2026-12-31, at its end, UTC), a time (…T18:00:00Z) or days from now (30d)", (v) =>
      parseExpiry(v),
    )
    .option("--limit <usd>", "a spending limit in USD per --period (e.g. 5.00)")
    .option("--period <period>", `the limit's period: ${PERIODS.join(", ")}`, (v: string) => {
      if (!(PERIODS as readonly string[]).includes(v))
        throw usage(`--period must be one of ${PERIODS.join(", ")}, not ${JSON.stringify(v)}.`);
      return v as SpendPeriod;
    })
    .option("--meta <name=value>", "metadata: what the key is for (repeat for each entry)", collectMeta);
  if (lifts)
    command
      .option("--all-skills", "let it call every skill")
      .option("--no-expires", "let it never expire")
      .option("--no-limit", "remove its spending limit")
      .option("--no-meta", "remove all its metadata");
  return command;
}

/**
 * Adds the `keys` command group to `program`: create, list, update, revoke (made with program.command, so that they
 * inherit its output and exit handling). `configOf` reads the global options; `print` writes JSON with --json, else
 * the text.
 */
export function addKeysCommands(
  program: Command,
  configOf: (cmd: Command) => CliConfig,
  print: (config: CliConfig, json: unknown, text: () => string) => void,
  table: (rows: string[][]) => string,
  stderr: (text: string) => void,
): void {
  const keys = program
    .command("keys")
    .description("make, list, change and revoke the account's API keys from code (the key used needs the keys:manage scope)");

  withKeyOptions(keys.command("create").description("make a key: prints the whole key (shown this once) on stdout"), false).action(
    async (options: KeyOptions, cmd: Command) => {
      const config = configOf(cmd);
      const made = await accountClient(config).keys.create(keyParams(options));
      // The key alone on stdout, so that KEY=$(skill-gateway keys create ...) holds it; what it is, on stderr.
      print(config, made, () => {
        stderr(`made ${made.id} (${made.scopes.join(", ")}); the key is shown this once:\n`);
        return `${made.key}\n`;
      });
    },
  );

  keys
    .command("list")
    .description("the account's live keys: id, name, scopes, skills, limit, expiry, metadata")
    .action(async (_options: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const listed = await accountClient(config).keys.list();
      print(config, listed, () =>
        listed.length === 0
          ? "No keys.\n"
          : table([["ID", "NAME", "SCOPES", "SKILLS", "LIMIT", "EXPIRES", "METADATA"], ...listed.map(keyRow)]),
      );
    });

  withKeyOptions(
    keys
      .command("update")
      .description("change a key: only the options given (in one change, at its next request)")
      .argument("<id>", "the key's id"),
    true,
  ).action(async (id: string, options: KeyOptions, cmd: Command) => {
    const config = configOf(cmd);
    const params = keyParams(options);
    if (Object.keys(params).length === 0)
      throw usage("Nothing to change: give at least one option (see skill-gateway keys update --help).");
    const changed = await accountClient(config).keys.update(id, params);
    print(config, changed, () => table([["ID", "NAME", "SCOPES", "SKILLS", "LIMIT", "EXPIRES", "METADATA"], keyRow(changed)]));
  });

  keys
    .command("revoke")
    .description("revoke a key at once: its next request gets 401")
    .argument("<id>", "the key's id")
    .action(async (id: string, _options: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const revoked = await accountClient(config).keys.revoke(id);
      print(config, revoked, () => `revoked ${revoked.id}\n`);
    });
}
