import fs from "node:fs";

/**
 * The code block a document marks `<!-- snippet: <name> -->` (the line right before its fence), as written: a test
 * runs what the reader copies, not a second copy of it that could drift.
 */
export function docSnippet(file: string, name: string): string {
  const text = fs.readFileSync(file, "utf8");
  const marker = `<!-- snippet: ${name} -->`;
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`${file} has no snippet marked ${marker}`);
  const block = /^```[^\n]*\n([\s\S]*?)^```/m.exec(text.slice(at + marker.length));
  if (!block || text.slice(at + marker.length, at + marker.length + block.index).trim() !== "") {
    throw new Error(`${file}: ${marker} is not followed by a fenced code block`);
  }
  return block[1];
}
