import fs from "node:fs";

/**
 * The code blocks of a document, each with the marker on the line right before its fence:
 *
 *   <!-- snippet: <name> -->              run as written (by its name's extension: .mjs, .ts, .sh, .py, .json)
 *   <!-- snippet: <name> given <what> --> run as written after what the reader has from the text around it (a
 *                                          `client` made as the quick start makes it, a chat `model`, ...); the test
 *                                          that runs it says what it supplies
 *   <!-- checked: <check> -->             not runnable as such (a path to fill in, a configuration for another
 *                                          program, a sample of output): the named check holds it to what is real
 *   <!-- not run: <why> -->               neither, and why (the gateway's own repository, a chain's RPC, ...)
 *
 * A test runs what the reader copies, not a second copy of it that could drift.
 */
export type DocMarker =
  { kind: "snippet"; name: string; given?: string } | { kind: "checked"; check: string } | { kind: "not run"; reason: string };

export interface DocBlock {
  /** 1-based line of the opening fence. */
  line: number;
  /** The fence's info string (`ts`, `sh`, ...). */
  lang: string;
  code: string;
  marker: DocMarker | null;
}

const MARKER = /^<!-- (?:snippet: (\S+)(?: given ([\w-]+))?|checked: ([\w-]+)|not run: (.+?)) -->$/;

/** Every fenced code block of `file`, in order, with its marker (null: none). */
export function docBlocks(file: string): DocBlock[] {
  const lines = fs.readFileSync(file, "utf8").split("\n");
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.findIndex((line, j) => j > i && line.startsWith("```"));
    if (end < 0) throw new Error(`${file}:${i + 1}: a code block that never closes`);
    const m = i > 0 ? MARKER.exec(lines[i - 1].trim()) : null;
    const marker: DocMarker | null = !m
      ? null
      : m[1]
        ? { kind: "snippet", name: m[1], ...(m[2] ? { given: m[2] } : {}) }
        : m[3]
          ? { kind: "checked", check: m[3] }
          : { kind: "not run", reason: m[4] };
    blocks.push({ line: i + 1, lang: open[1], code: lines.slice(i + 1, end).join("\n") + "\n", marker });
    i = end;
  }
  return blocks;
}

/** The code block a document marks `<!-- snippet: <name> -->` (with or without `given`), as written. */
export function docSnippet(file: string, name: string): string {
  const found = docBlocks(file).filter((b) => b.marker?.kind === "snippet" && b.marker.name === name);
  if (found.length !== 1) throw new Error(`${file} has ${found.length} snippets marked <!-- snippet: ${name} -->, not one`);
  return found[0].code;
}
