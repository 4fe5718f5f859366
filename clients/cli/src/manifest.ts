import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { type Manifest, emptyManifest, isManifestError, readManifest as readManifestFile } from "@skill-gateway/sdk";
import { CliError, EXIT } from "./errors";

/**
 * The agent's skills: `skill-gateway.json` in the project. Each skill is pinned when added (what it was, what it cost,
 * its schema), and records exactly the files and folders `add` created, so `remove` deletes those and nothing else.
 * The format and its reader are the SDK's (`@skill-gateway/sdk`'s manifest.ts, shared with LangChain's toolkit); the
 * CLI writes it.
 */
export {
  MANIFEST_FILE,
  MANIFEST_VERSION,
  type Manifest,
  type ManifestSkill,
  type WrittenFile,
  emptyManifest,
  findSkill,
  manifestProblem,
  pinnedCap,
  SMALLEST_CAP_USD,
} from "@skill-gateway/sdk";

/** Reads the manifest; a missing file is an empty manifest, an unreadable or invalid one a CliError (exit 10). */
export function readManifest(file: string): Manifest {
  try {
    return readManifestFile(file);
  } catch (error) {
    if (!isManifestError(error)) throw error;
    if (error.code === "manifest_missing") return emptyManifest();
    throw new CliError(error.message, EXIT.manifest, error.code);
  }
}

/**
 * Writes the manifest through a temporary file and a rename, so a crash never leaves half a
 * manifest (and with it, files nobody remembers writing).
 */
export function writeManifest(file: string, manifest: Manifest): void {
  const tmp = `${file}.${randomBytes(4).toString("hex")}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(manifest, null, 2)}\n`);
  fs.renameSync(tmp, file);
}

/** The project folder a manifest belongs to: where the skill folders are written. */
export function projectDirOf(manifestFile: string): string {
  return path.dirname(path.resolve(manifestFile));
}
