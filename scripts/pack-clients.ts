/**
 * `npm run pack:clients`: the four clients as the files a developer installs in a project of their own, written to
 * dist/clients/ (or the folder given as the first argument):
 *
 *   skill-gateway-sdk-<v>.tgz        @skill-gateway/sdk        (npm pack of clients/typescript)
 *   skill-gateway-cli-<v>.tgz        @skill-gateway/cli        (clients/cli)
 *   skill-gateway-langchain-<v>.tgz  @skill-gateway/langchain  (clients/langchain)
 *   skill_gateway-<v>-py3-none-any.whl and skill_gateway-<v>.tar.gz  (clients/python, setuptools)
 *
 * Each is packed from a clean copy of its sources in a temporary folder, never from the working tree: whatever
 * dist/ or build/ a developer has lying around cannot end up in a package, and the repository is not written to
 * while tests run beside it. The npm packages build themselves in their `prepack` script (tsc into dist/); the
 * copy's node_modules links to the repository's for the build tools and the packages' own dependencies, except
 * @skill-gateway/*, which are the copies (so the CLI and LangChain build against the SDK just built).
 *
 * The Python package is built by calling setuptools' PEP 517 hooks directly, which is what `python -m build
 * --no-isolation` does; the `build` front end is often not installed (Debian's python3 lacks it), and nothing
 * here may reach a package index.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, "..");

/** The npm packages, in the order they are packed (the others build against the SDK). */
export const NPM_CLIENTS = [
  { name: "@skill-gateway/sdk", dir: "typescript" },
  { name: "@skill-gateway/cli", dir: "cli" },
  { name: "@skill-gateway/langchain", dir: "langchain" },
] as const;

export interface PackedClients {
  version: string;
  /** Absolute paths of the files written. */
  sdk: string;
  cli: string;
  langchain: string;
  wheel: string;
  sdist: string;
}

export interface PackOptions {
  /** The Python interpreter that builds the wheel and sdist (default /usr/bin/python3, else python3). */
  python?: string;
}

/** Files and folders never copied into the clean tree: builds, installs and caches. */
const SKIPPED = new Set(["node_modules", "dist", "build", "__pycache__", ".pytest_cache"]);

/**
 * The clients' version. It is the SDK's package.json `version`: the one place code reads it from (the SDK's `VERSION`,
 * which the CLI reports). The other files must still state it, since npm requires a version in each package.json, the
 * CLI and LangChain depend on the SDK of their own version, and a Python package built from its folder cannot read an
 * npm file (_version.py, which pyproject.toml reads); so each is checked to say the same, and a mismatch refuses to
 * pack, naming each file.
 */
export function clientsVersion(root = ROOT): string {
  const found: Array<[string, string | undefined]> = [];
  for (const client of NPM_CLIENTS) {
    const file = `clients/${client.dir}/package.json`;
    const pkg = JSON.parse(fs.readFileSync(path.join(root, file), "utf8")) as {
      version?: string;
      dependencies?: Record<string, string>;
    };
    found.push([`${file} version`, pkg.version]);
    if (client.dir !== "typescript") found.push([`${file} dependency @skill-gateway/sdk`, pkg.dependencies?.["@skill-gateway/sdk"]]);
  }
  const pythonFile = "clients/python/src/skill_gateway/_version.py";
  found.push([pythonFile, /__version__\s*=\s*"([^"]+)"/.exec(fs.readFileSync(path.join(root, pythonFile), "utf8"))?.[1]]);
  const versions = new Set(found.map(([, v]) => v));
  if (versions.size !== 1 || found[0][1] === undefined) {
    throw new Error(
      `The clients' versions differ; make them one:\n${found.map(([where, v]) => `  ${where}: ${v ?? "(none)"}`).join("\n")}`,
    );
  }
  return found[0][1];
}

/** The environment for npm: offline (a pack needs no registry), quiet, and free of the calling npm's settings. */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^npm_/i.test(key)) env[key] = value;
  return { ...env, npm_config_offline: "true", npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" };
}

/** A clean copy of clients/<dir> under `tree`, with node_modules linked as described above. */
function copyClient(tree: string, dir: string): string {
  const from = path.join(ROOT, "clients", dir);
  const to = path.join(tree, "clients", dir);
  fs.cpSync(from, to, {
    recursive: true,
    filter: (source) => {
      const base = path.basename(source);
      return !SKIPPED.has(base) && !base.endsWith(".egg-info") && !base.endsWith(".tsbuildinfo");
    },
  });
  // A client's own node_modules (the CLI's commander and zod, newer than the root's) comes along as a link.
  const own = path.join(from, "node_modules");
  if (fs.existsSync(own)) fs.symlinkSync(fs.realpathSync(own), path.join(to, "node_modules"), "dir");
  return to;
}

/** tree/node_modules: a link to each of the repository's packages, with @skill-gateway/* the clean copies. */
function linkNodeModules(tree: string): void {
  const source = fs.realpathSync(path.join(ROOT, "node_modules"));
  const target = path.join(tree, "node_modules");
  fs.mkdirSync(target);
  for (const entry of fs.readdirSync(source)) {
    if (entry === "@skill-gateway") continue;
    fs.symlinkSync(path.join(source, entry), path.join(target, entry));
  }
  fs.mkdirSync(path.join(target, "@skill-gateway"));
  for (const client of NPM_CLIENTS) {
    fs.symlinkSync(path.join(tree, "clients", client.dir), path.join(target, client.name), "dir");
  }
}

/** Packs the four clients into `outDir` (created if missing) and returns the files written. */
export async function packClients(outDir: string, options: PackOptions = {}): Promise<PackedClients> {
  const version = clientsVersion();
  const python = options.python ?? (fs.existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3");
  fs.mkdirSync(outDir, { recursive: true });
  const out = fs.realpathSync(outDir);
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), "sg-pack-tree-"));
  try {
    for (const client of NPM_CLIENTS) copyClient(tree, client.dir);
    const pythonDir = copyClient(tree, "python");
    linkNodeModules(tree);

    const npmPack = async (dir: string): Promise<string> => {
      try {
        const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", out], {
          cwd: path.join(tree, "clients", dir),
          env: npmEnv(),
          maxBuffer: 16 * 1024 * 1024,
        });
        // prepack's own output (tsc's, if any) comes before the JSON array.
        const [packed] = JSON.parse(stdout.slice(stdout.indexOf("\n[") + 1 || stdout.indexOf("["))) as Array<{ filename: string }>;
        return path.join(out, packed.filename);
      } catch (error) {
        const { stdout, stderr } = error as { stdout?: string; stderr?: string };
        throw new Error(`npm pack of clients/${dir} failed:\n${stderr ?? ""}${stdout ?? ""}`);
      }
    };
    /** One PEP 517 hook in a process of its own, as a build front end calls it (setuptools keeps state between hooks). */
    const pep517 = async (hook: "build_sdist" | "build_wheel"): Promise<string> => {
      const script = `import sys, setuptools.build_meta as backend\nprint("pep517-result:" + backend.${hook}(sys.argv[1]))`;
      try {
        const { stdout } = await run(python, ["-c", script, out], {
          cwd: pythonDir,
          env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" },
        });
        const name = /^pep517-result:(.+)$/m.exec(stdout)?.[1];
        if (!name) throw new Error(`setuptools' ${hook} named no file:\n${stdout}`);
        return path.join(out, name.trim());
      } catch (error) {
        const { stdout, stderr, message } = error as { stdout?: string; stderr?: string; message: string };
        throw new Error(
          `Building the Python package (clients/python, ${hook}) with ${python} and setuptools failed:\n${stderr ?? ""}${stdout ?? message}` +
            "\n(Debian: apt-get install python3-setuptools python3-wheel)",
        );
      }
    };
    const buildPython = async (): Promise<{ wheel: string; sdist: string }> => {
      const sdist = await pep517("build_sdist");
      return { sdist, wheel: await pep517("build_wheel") };
    };

    // Python builds beside the SDK; the CLI and LangChain build against the SDK's declarations, so they follow it.
    const [sdk, pythonFiles] = await Promise.all([npmPack("typescript"), buildPython()]);
    const [cli, langchain] = await Promise.all([npmPack("cli"), npmPack("langchain")]);
    return { version, sdk, cli, langchain, ...pythonFiles };
  } finally {
    fs.rmSync(tree, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const outDir = path.resolve(process.argv[2] ?? path.join(ROOT, "dist", "clients"));
  fs.rmSync(outDir, { recursive: true, force: true });
  packClients(outDir).then(
    (packed) => {
      process.stdout.write(`Clients ${packed.version}, in ${path.relative(process.cwd(), outDir) || "."}:\n`);
      for (const file of [packed.sdk, packed.cli, packed.langchain, packed.wheel, packed.sdist]) {
        process.stdout.write(`  ${path.basename(file)}\n`);
      }
    },
    (error: Error) => {
      process.stderr.write(`pack:clients: ${error.message}\n`);
      process.exitCode = 1;
    },
  );
}
