import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { CliError, EXIT } from "./errors";
import type { ManifestSkill, WrittenFile } from "./manifest";

/**
 * Writing and removing a skill's Agent Skills folder. `add` records every file it writes and
 * every folder it creates; `remove` deletes only those files (and only while they still hold
 * what was written), then those folders only if they are then empty.
 */

export interface Written {
  files: WrittenFile[];
  dirs: string[];
}

export interface Removed {
  /** Files deleted, relative to the project. */
  removed: string[];
  /** Files kept because they were edited since `add` wrote them. */
  kept: string[];
  /** Folders deleted (they were created by `add` and are now empty). */
  removedDirs: string[];
}

/**
 * Writes `files` (paths relative to `projectDir`, forward slashes) and returns what was
 * written, with the folders that had to be created. A file that already exists and was not
 * written by this CLI (`ours` does not list it) is left alone and the write is refused.
 */
export function writeFiles(projectDir: string, files: Record<string, string>, ours: ReadonlySet<string> = new Set()): Written {
  for (const rel of Object.keys(files)) {
    const abs = resolveInside(projectDir, rel);
    if (fs.existsSync(abs) && !ours.has(rel)) {
      throw new CliError(`${rel} already exists and was not written by skill-gateway; move it away first.`, EXIT.manifest, "file_exists");
    }
  }
  const created: string[] = [];
  const written: WrittenFile[] = [];
  for (const [rel, content] of Object.entries(files)) {
    const abs = resolveInside(projectDir, rel);
    created.push(...createDirs(projectDir, path.dirname(abs)));
    fs.writeFileSync(abs, content);
    written.push({ path: rel, sha256: sha256(content) });
  }
  // Deepest first, the order in which they can be removed.
  const dirs = [...new Set(created)].sort((a, b) => b.split("/").length - a.split("/").length);
  return { files: written, dirs };
}

/** Removes what `writeFiles` wrote for a skill, as recorded in the manifest. */
export function removeWritten(projectDir: string, skill: Pick<ManifestSkill, "files" | "dirs">): Removed {
  const result: Removed = { removed: [], kept: [], removedDirs: [] };
  for (const file of skill.files) {
    const abs = resolveInside(projectDir, file.path);
    let content: Buffer;
    try {
      content = fs.readFileSync(abs);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw error;
    }
    if (sha256(content) !== file.sha256) {
      result.kept.push(file.path);
      continue;
    }
    fs.unlinkSync(abs);
    result.removed.push(file.path);
  }
  for (const dir of skill.dirs) {
    const abs = resolveInside(projectDir, dir);
    try {
      fs.rmdirSync(abs); // fails on a folder that is not empty: that is the point
      result.removedDirs.push(dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ENOTEMPTY" && code !== "EEXIST" && code !== "ENOENT") throw error;
    }
  }
  return result;
}

/** Creates `absDir` and its missing parents inside `projectDir`; returns those created, relative. */
function createDirs(projectDir: string, absDir: string): string[] {
  const missing: string[] = [];
  for (let dir = absDir; dir !== projectDir && !fs.existsSync(dir); dir = path.dirname(dir)) missing.push(dir);
  fs.mkdirSync(absDir, { recursive: true });
  return missing.map((dir) => toRelative(projectDir, dir));
}

/**
 * The absolute path of `rel` under `projectDir`. The manifest is a file anyone can edit: a
 * path that leaves the project is refused rather than written or deleted.
 */
export function resolveInside(projectDir: string, rel: string): string {
  const abs = path.resolve(projectDir, rel);
  const back = path.relative(projectDir, abs);
  if (path.isAbsolute(rel) || back === "" || back.startsWith("..") || path.isAbsolute(back)) {
    throw new CliError(
      `Refusing the path ${JSON.stringify(rel)}: it is not inside the project ${projectDir}.`,
      EXIT.manifest,
      "path_outside_project",
    );
  }
  return abs;
}

function toRelative(projectDir: string, abs: string): string {
  return path.relative(projectDir, abs).split(path.sep).join("/");
}

function sha256(content: string | Buffer): string {
  return createHash("sha256").update(content).digest("hex");
}
