import { Command, CommanderError, InvalidArgumentError } from "commander";
import { AGENTS, ALL_AGENTS, DEFAULT_AGENTS, agentLocation } from "./agents";
import { addSkills, costLine, displayPath, listSkills, parseInput, readStdin, removeSkills, searchMarketplace } from "./commands";
import { type CliConfig, type GlobalOptions, accountClient, marketplaceClient, resolveConfig } from "./config";
import { CliError, EXIT, type ExitCode, errorCodeFor, errorMessageFor, exitCodeFor, pinnedPriceError } from "./errors";
import { findSkill, pinnedCap, projectDirOf, readManifest } from "./manifest";
import { addKeysCommands } from "./keys";
import { addMcpInstallCommand } from "./mcp-install";
import { type McpSource, parseSkillList, skillsSource } from "./mcp-source";
import { formatUsd } from "./skill-md";
import { addVerifyCommand } from "./verify";
import { CLI_VERSION } from "./version";

/** Where the CLI reads and writes: the process's by default, replaced in tests. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  cwd: string;
}

/**
 * A reader that stops early (`skill-gateway --help | head -1`) closes the pipe under the CLI's next write: stop quietly
 * then, as Unix tools do, rather than crash with EPIPE's stack. Other write errors are left to Node.
 */
function stopQuietlyOnClosedPipe(stream: NodeJS.WriteStream): void {
  if (stream.listenerCount("error") > 0) return;
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(EXIT.ok);
  });
}

const processIo = (): CliIo => {
  stopQuietlyOnClosedPipe(process.stdout);
  stopQuietlyOnClosedPipe(process.stderr);
  return processIoOf();
};

const processIoOf = (): CliIo => ({
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  stdin: process.stdin,
  env: process.env,
  cwd: process.cwd(),
});

function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return `${rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join("  ")).join("\n")}\n`;
}

/** --agent's parser: repeated and comma-separated values accumulate; an unknown agent is refused at once. */
function collectAgents(value: string, previous: string[]): string[] {
  const ids = value.split(",").map((s) => s.trim());
  const unknown = ids.filter((id) => id !== ALL_AGENTS && !agentLocation(id));
  if (unknown.length > 0) throw new InvalidArgumentError(`Allowed: ${[...AGENTS.map((a) => a.id), ALL_AGENTS].join(", ")}.`);
  return [...previous, ...ids];
}

/** The commander program; `run` below parses with it and maps failures to exit codes. */
export function buildProgram(io: CliIo): Command {
  const program = new Command()
    .name("skill-gateway")
    .description("Give an agent skills from the Skill Gateway marketplace, call them, and serve them over MCP.")
    .version(CLI_VERSION)
    .option("--api-key <key>", "the atom_ API key (default: $SKILL_GATEWAY_API_KEY)")
    .option("--url <url>", "the gateway (default: $SKILL_GATEWAY_URL, else http://127.0.0.1:8787)")
    .option("--manifest <file>", "the agent's manifest", "./skill-gateway.json")
    .option("--json", "print JSON for scripts")
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    .showSuggestionAfterError(true);

  const configOf = (cmd: Command): CliConfig => resolveConfig(cmd.optsWithGlobals<GlobalOptions>(), io.env, io.cwd);
  const print = (config: CliConfig, json: unknown, text: () => string) =>
    io.stdout(config.json ? `${JSON.stringify(json, null, 2)}\n` : text());

  program
    .command("add")
    .description("look skills up in the marketplace, pin them in the manifest and write a SKILL.md for each where the agent reads it")
    .argument("<skills...>", "slugs or UUIDs")
    .option(
      "--agent <agents>",
      `the agents that read the skills: ${[...AGENTS.map((a) => a.id), ALL_AGENTS].join(", ")}; repeat it or separate with commas (default: the agents the project has, by their folders, else ${DEFAULT_AGENTS.join(" and ")})`,
      collectAgents,
      [] as string[],
    )
    .addHelpText(
      "after",
      `\nLocations:\n${AGENTS.map((a) => `  ${a.id.padEnd(9)} ${a.skillsDir}/<slug>/SKILL.md  (${a.label}; detected by ${a.marker}/)`).join("\n")}\n`,
    )
    .action(async (refs: string[], options: { agent: string[] }, cmd: Command) => {
      const config = configOf(cmd);
      const result = await addSkills(marketplaceClient(config), config.manifestFile, refs, {
        agents: options.agent,
        gatewayUrl: config.baseUrl,
      });
      const projectDir = projectDirOf(config.manifestFile);
      print(config, result, () =>
        result.added
          .map(
            (s) => `added ${s.slug} (${formatUsd(s.price)}/call): ${s.paths.map((p) => displayPath(projectDir, p, io.cwd)).join(", ")}\n`,
          )
          .join(""),
      );
    });

  program
    .command("list")
    .description("show the agent's skills: slug, name, price and where each was written")
    .action((_options: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const skills = listSkills(config.manifestFile);
      const projectDir = projectDirOf(config.manifestFile);
      print(config, skills, () =>
        skills.length === 0
          ? "No skills yet. Add one with: skill-gateway add <slug>\n"
          : table([
              ["SLUG", "NAME", "PRICE", "WRITTEN TO"],
              ...skills.map((s) => [s.slug, s.name, formatUsd(s.price), s.files.map((f) => displayPath(projectDir, f, io.cwd)).join(", ")]),
            ]),
      );
    });

  program
    .command("search")
    .description("browse the marketplace: skills whose slug, name or description has every word")
    .argument("[words...]", "words to look for (none: every skill)")
    .action(async (words: string[], _options: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const skills = await searchMarketplace(marketplaceClient(config), words);
      print(config, skills, () =>
        skills.length === 0
          ? "No skills match.\n"
          : table([
              ["SLUG", "PRICE", "NAME", "DESCRIPTION"],
              ...skills.map((s) => [s.slug, formatUsd(s.price_per_call), s.name, s.description.replace(/\s+/g, " ").slice(0, 80)]),
            ]),
      );
    });

  program
    .command("remove")
    .description("remove skills: exactly the files add wrote for them (edited ones are kept), and their folders if then empty")
    .argument("<slugs...>", "slugs (or UUIDs) in the manifest")
    .action((refs: string[], _options: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const result = removeSkills(config.manifestFile, refs);
      const projectDir = projectDirOf(config.manifestFile);
      print(config, result, () =>
        result.removed
          .map((r) =>
            [
              `removed ${r.slug}${r.removed.length ? `: ${r.removed.map((f) => displayPath(projectDir, f, io.cwd)).join(", ")}` : ""}\n`,
              ...r.kept.map((f) => `kept ${displayPath(projectDir, f, io.cwd)}: edited since it was added\n`),
            ].join(""),
          )
          .join(""),
      );
    });

  program
    .command("call")
    .description(
      "call a skill: prints its data on stdout and the cost on stderr; a skill in the manifest is held to the price pinned when it was added",
    )
    .argument("<skill>", "slug or UUID")
    .option("-i, --input <json>", "the input, a JSON object (default: stdin when it is not a terminal, else {})")
    .option(
      "--max-price <usd>",
      "the most the call may cost, in USD (default: the pinned price for a skill in the manifest, else any)",
      (v) => {
        if (!/^\d+(\.\d{1,6})?$/.test(v) || Number(v) <= 0)
          throw new CliError(
            `--max-price must be a USD amount above 0 with at most 6 decimals, not ${JSON.stringify(v)}.`,
            EXIT.usage,
            "invalid_option",
          );
        return v;
      },
    )
    .action(async (skill: string, options: { input?: string; maxPrice?: string }, cmd: Command) => {
      const config = configOf(cmd);
      const client = accountClient(config);
      // "Pinned" means it: a skill added to the manifest is called at most at the price it was added at.
      const pinned = options.maxPrice === undefined ? findSkill(readManifest(config.manifestFile), skill) : undefined;
      const maxPrice = options.maxPrice ?? (pinned ? pinnedCap(pinned) : undefined);
      const text = options.input ?? (io.stdin.isTTY ? undefined : await readStdin(io.stdin));
      const input = parseInput(text);
      let result: Awaited<ReturnType<typeof client.call>>;
      try {
        result = await client.call(skill, input, maxPrice === undefined ? {} : { maxPrice });
      } catch (error) {
        throw pinned ? pinnedPriceError(error, pinned) : error;
      }
      const { data, metadata } = result;
      io.stdout(`${JSON.stringify(config.json ? { data, metadata } : data, null, 2)}\n`);
      io.stderr(`${costLine(metadata.cost, metadata.callId)}\n`);
    });

  program
    .command("balance")
    .description("the API key's balance: available and held")
    .action(async (_options: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const balance = await accountClient(config).balance();
      print(
        config,
        balance,
        () => `available: ${formatUsd(balance.available)} ${balance.currency}\nheld: ${formatUsd(balance.held)} ${balance.currency}\n`,
      );
    });

  program
    .command("usage")
    .description("the account's recent calls, newest first")
    .option(
      "-n, --limit <n>",
      "how many calls (1 to 500)",
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1 || n > 500)
          throw new CliError(`--limit must be a whole number from 1 to 500, not ${JSON.stringify(v)}.`, EXIT.usage, "invalid_option");
        return n;
      },
      20,
    )
    .action(async (options: { limit: number }, cmd: Command) => {
      const config = configOf(cmd);
      const page = await accountClient(config).usage({ limit: options.limit });
      print(config, { calls: page.calls, next_before: page.nextBefore }, () =>
        page.calls.length === 0
          ? "No calls yet.\n"
          : table([
              ["WHEN", "SKILL", "STATUS", "COST", "MS"],
              ...page.calls.map((c) => [
                c.created_at,
                c.skill_id,
                `${c.status} ${c.http_status}`,
                formatUsd(c.cost),
                String(Math.round(c.response_time_ms)),
              ]),
            ]),
      );
    });

  // A call's charge checked against the chain alone (./verify.ts).
  addVerifyCommand(program, configOf, print);

  // Keys made by code: create, list, update, revoke (./keys.ts).
  addKeysCommands(program, configOf, print, table, io.stderr);

  const mcp = program
    .command("mcp")
    .description(
      "serve skills as MCP tools over stdio (for Claude Desktop, Cursor, Claude Code, ...): the manifest's, or those named by --skills",
    )
    .option(
      "--skills <slugs>",
      "serve these marketplace skills (comma-separated), at their current prices, without a manifest",
      parseSkillList,
    )
    .action(async (options: { skills?: string[] }, cmd: Command) => {
      const config = configOf(cmd);
      const client = accountClient(config);
      const source: McpSource = options.skills
        ? await skillsSource(client, options.skills)
        : { kind: "manifest", file: config.manifestFile };
      // Loaded here, not at start: the MCP SDK takes longer to load than any other command takes to run.
      const { runMcpStdio } = await import("./mcp");
      await runMcpStdio(client, source, { cwd: io.cwd, log: (line) => io.stderr(`${line}\n`) });
    });
  addMcpInstallCommand(mcp, configOf, io);

  return program;
}

/** Runs the CLI on `argv` (without node and the script) and returns its exit code. */
export async function run(argv: string[], io: CliIo = processIo()): Promise<ExitCode> {
  const program = buildProgram(io);
  try {
    await program.parseAsync(argv, { from: "user" });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version exit 0; commander has already printed its one-line error otherwise.
      if (error.exitCode === 0) return EXIT.ok;
      if (error.code === "commander.executeSubCommandAsync" || error.code === "commander.help") return EXIT.ok;
      return EXIT.usage;
    }
    const json = argv.includes("--json");
    io.stderr(
      json
        ? `${JSON.stringify({ error: errorMessageFor(error), code: errorCodeFor(error) })}\n`
        : `skill-gateway: ${errorMessageFor(error)}\n`,
    );
    const code = exitCodeFor(error);
    if (code === EXIT.internal && error instanceof Error && error.stack && io.env.SKILL_GATEWAY_DEBUG) io.stderr(`${error.stack}\n`);
    return code;
  }
}

if (require.main === module) {
  void run(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
