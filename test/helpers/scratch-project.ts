import { createHash } from "node:crypto";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";

/**
 * A project outside the repository with the packed clients installed by `npm ci --offline`: what a developer
 * gets from `npm install ./skill-gateway-*.tgz`, without a registry.
 *
 * Why a lockfile is written here. `npm install --offline <tarball>` resolves the tarballs' dependencies
 * (`commander@^14`, `@modelcontextprotocol/sdk@^1.32.2`, ...) against the registry's package documents, and the
 * repository's `npm ci` does not cache those (it installs from its lockfile, so it fetches tarballs only): the
 * install fails with ENOTCACHED. So the scratch project gets the lockfile `npm install` would have written, made
 * from the repository's package-lock.json: the packed tarballs at `node_modules/@skill-gateway/*`, and every
 * third-party package they need, with the version and integrity the repository pinned, at the place it has in
 * the repository's tree (a client's nested `clients/cli/node_modules/x` becomes
 * `node_modules/@skill-gateway/cli/node_modules/x`, where Node finds it the same way). `npm ci --offline` then
 * installs all of it for real, each third-party tarball from the npm cache by its integrity, each client from its
 * .tgz: the files the package ships, its bin links and its dependencies, and a missing one fails the install.
 */

const REPO = path.resolve(__dirname, "..", "..");

interface LockEntry {
  version?: string;
  resolved?: string;
  integrity?: string;
  link?: boolean;
  dev?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  optional?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [field: string]: unknown;
}

interface PackageJson {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  bin?: Record<string, string>;
  engines?: Record<string, string>;
  license?: string;
}

export interface ScratchPackage {
  /** The .tgz written by npm pack. */
  tarball: string;
  /** Where its sources are in the repository (`clients/cli`): its own dependencies resolve from there. */
  repoDir: string;
}

/** The package.json inside a packed tarball. */
async function packedPackageJson(tarball: string): Promise<PackageJson> {
  const { stdout } = await promisify(execFile)("tar", ["-xzOf", tarball, "package/package.json"]);
  return JSON.parse(stdout) as PackageJson;
}

/**
 * The lockfile entry Node would find for `name` required from `from` (a key of the repository's lockfile, or a
 * workspace folder): the nearest `node_modules/<name>` up the tree.
 */
function resolveInLock(packages: Record<string, LockEntry>, from: string, name: string): string | undefined {
  for (let dir = from; ; dir = path.posix.dirname(dir)) {
    const key = dir === "" || dir === "." ? `node_modules/${name}` : `${dir}/node_modules/${name}`;
    if (packages[key]) return key;
    if (dir === "" || dir === ".") return undefined;
  }
}

/**
 * Writes package.json and package-lock.json in `dir` for `packages` (the packed clients) and `extra` (third-party
 * packages the project itself depends on, as a user would add `@langchain/core`), and runs `npm ci --offline`.
 */
export async function installScratchProject(dir: string, packed: ScratchPackage[], extra: string[] = []): Promise<void> {
  const lock = JSON.parse(fs.readFileSync(path.join(REPO, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> };
  const repoPackages = lock.packages;
  const clients = await Promise.all(packed.map(async (p) => ({ ...p, pkg: await packedPackageJson(p.tarball) })));
  const clientNames = new Set(clients.map((c) => c.pkg.name));
  const newKey = (repoKey: string): string => {
    const client = clients.find((c) => repoKey.startsWith(`${c.repoDir}/`));
    return client ? `node_modules/${client.pkg.name}/${repoKey.slice(client.repoDir.length + 1)}` : repoKey;
  };

  // Every third-party package the clients and `extra` need, followed through the repository's tree.
  const kept = new Set<string>();
  const queue: Array<{ from: string; deps: Record<string, string>; optional: Set<string> }> = [];
  const edgesOf = (entry: LockEntry | PackageJson, from: string) => {
    const optional = new Set([
      ...Object.keys((entry as LockEntry).optionalDependencies ?? {}),
      ...Object.entries(entry.peerDependenciesMeta ?? {})
        .filter(([, meta]) => meta.optional)
        .map(([name]) => name),
    ]);
    const deps = { ...(entry as LockEntry).optionalDependencies, ...entry.peerDependencies, ...entry.dependencies };
    for (const name of optional) if (!entry.dependencies?.[name] && !(entry as LockEntry).optionalDependencies?.[name]) delete deps[name];
    queue.push({ from, deps, optional });
  };
  for (const client of clients) edgesOf(client.pkg, client.repoDir);
  queue.push({ from: "", deps: Object.fromEntries(extra.map((name) => [name, "*"])), optional: new Set() });
  while (queue.length > 0) {
    const { from, deps, optional } = queue.shift()!;
    for (const name of Object.keys(deps)) {
      if (clientNames.has(name)) continue; // a packed client: installed from its tarball
      const key = resolveInLock(repoPackages, from, name);
      if (!key) {
        if (optional.has(name)) continue;
        throw new Error(`${name}, needed from ${from || "the project"}, is not in the repository's package-lock.json`);
      }
      if (repoPackages[key].link) throw new Error(`${name} is a workspace link in the repository (${key}), not a packed client`);
      if (kept.has(key)) continue;
      kept.add(key);
      edgesOf(repoPackages[key], key);
    }
  }

  const tarballSpec = (tarball: string) => `file:${path.relative(dir, tarball).split(path.sep).join("/")}`;
  const rootDeps: Record<string, string> = {};
  for (const client of clients) rootDeps[client.pkg.name] = tarballSpec(client.tarball);
  for (const name of extra) rootDeps[name] = repoPackages[`node_modules/${name}`].version!;

  const lockPackages: Record<string, unknown> = { "": { name: "scratch", version: "1.0.0", dependencies: rootDeps } };
  for (const client of clients) {
    const { name, version, dependencies, peerDependencies, peerDependenciesMeta, bin, engines, license } = client.pkg;
    const integrity = `sha512-${createHash("sha512").update(fs.readFileSync(client.tarball)).digest("base64")}`;
    lockPackages[`node_modules/${name}`] = {
      version,
      resolved: tarballSpec(client.tarball),
      integrity,
      license,
      dependencies,
      peerDependencies,
      peerDependenciesMeta,
      bin,
      engines,
    };
  }
  for (const key of [...kept].sort()) {
    const { dev: _dev, devOptional: _devOptional, peer: _peer, ...entry } = repoPackages[key];
    lockPackages[newKey(key)] = entry;
  }

  fs.writeFileSync(
    path.join(dir, "package.json"),
    `${JSON.stringify({ name: "scratch", version: "1.0.0", private: true, dependencies: rootDeps }, null, 2)}\n`,
  );
  fs.writeFileSync(
    path.join(dir, "package-lock.json"),
    `${JSON.stringify({ name: "scratch", version: "1.0.0", lockfileVersion: 3, requires: true, packages: lockPackages }, null, 2)}\n`,
  );
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^npm_/i.test(key)) env[key] = value;
  try {
    await promisify(execFile)("npm", ["ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd: dir,
      env: { ...env, npm_config_update_notifier: "false" },
    });
  } catch (error) {
    const { stderr } = error as { stderr?: string };
    throw new Error(`npm ci --offline in the scratch project failed:\n${stderr ?? (error as Error).message}`);
  }
}
