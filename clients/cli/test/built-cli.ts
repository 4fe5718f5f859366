import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { build } from "esbuild";

/** The launcher of this source tree: with no dist/ beside it, it compiles src/ through ts-node as it starts. */
export const LAUNCHER = path.join(__dirname, "..", "bin", "skill-gateway.cjs");

/**
 * The CLI as its package ships it, built once per test file: the same launcher beside a dist/cli.js, here
 * src/cli.ts and the SDK's source bundled by esbuild (the package's own build is tsc, which the packaging test
 * covers, test/e2e/packaging.test.ts). A process then starts in a fraction of a second instead of loading TypeScript
 * and compiling the sources again. The end-to-end test runs LAUNCHER itself, so the path a clone takes stays
 * tested. Remove `dir` when done.
 */
export async function buildCli(): Promise<{ launcher: string; dir: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sg-cli-build-"));
  await build({
    entryPoints: [path.join(__dirname, "..", "src", "cli.ts")],
    // The CLI's tsconfig.json maps @skill-gateway/sdk to the SDK's source, as ts-node's run from a clone does.
    tsconfig: path.join(__dirname, "..", "tsconfig.json"),
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    outfile: path.join(dir, "dist", "cli.js"),
    logLevel: "silent",
  });
  // The package's package.json beside dist/, as installed (the version itself is the SDK's, bundled in).
  fs.copyFileSync(path.join(__dirname, "..", "package.json"), path.join(dir, "package.json"));
  fs.mkdirSync(path.join(dir, "bin"));
  fs.copyFileSync(LAUNCHER, path.join(dir, "bin", "skill-gateway.cjs"));
  return { launcher: path.join(dir, "bin", "skill-gateway.cjs"), dir };
}
