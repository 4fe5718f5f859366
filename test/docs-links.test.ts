import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";

/**
 * The documentation's links do not rot: every relative link in a Markdown file of the repository reaches a file
 * or folder that exists, and every `#anchor` names a heading of the page it points at (GitHub's slugs). Links to
 * other sites are not fetched. The README is a front door that points into docs/, so a moved section must take
 * its links with it.
 */

const ROOT = path.join(__dirname, "..");
/** Folders that hold no documentation of ours: dependencies, build output, the chain's artifacts, test output. */
const SKIPPED = new Set([".git", "node_modules", "dist", "artifacts", "cache", "typechain-types", "deployments", "data", "test-artifacts"]);

function markdownFiles(dir: string): string[] {
  const found: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (SKIPPED.has(entry.name) || entry.name.startsWith(".venv") || entry.name === "__pycache__") continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory() && !entry.isSymbolicLink()) found.push(...markdownFiles(full));
    else if (entry.isFile() && entry.name.endsWith(".md")) found.push(full);
  }
  return found;
}

/** The page's lines outside fenced code blocks, with inline code spans blanked (a link inside one is an example). */
function proseLines(text: string): { line: string; number: number }[] {
  const lines: { line: string; number: number }[] = [];
  let fence: string | undefined;
  text.split("\n").forEach((line, index) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker !== undefined) {
      if (fence === undefined) fence = marker[0];
      else if (marker[0] === fence) fence = undefined;
      return;
    }
    if (fence === undefined) lines.push({ line: line.replace(/`+[^`]*`+/g, (span) => " ".repeat(span.length)), number: index + 1 });
  });
  return lines;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; a repeat gets -1, -2, ... */
export function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
    .replace(/ /g, "-");
}

function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of text.split("\n")) {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker !== undefined) {
      if (fence === undefined) fence = marker[0];
      else if (marker[0] === fence) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading !== undefined) {
      const base = slug(heading.trim());
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const [, name] of line.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(name);
  }
  return anchors;
}

/** Every broken relative link of the repository's Markdown, as "file:line: target (why)". */
export function brokenLinks(root = ROOT): string[] {
  const broken: string[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    let found = anchorCache.get(file);
    if (found === undefined) anchorCache.set(file, (found = anchorsOf(fs.readFileSync(file, "utf8"))));
    return found;
  };
  for (const file of markdownFiles(root)) {
    const where = path.relative(root, file);
    for (const { line, number } of proseLines(fs.readFileSync(file, "utf8"))) {
      for (const [, raw] of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(raw)) continue; // https:, mailto:, ...
        const hash = raw.indexOf("#");
        const target = decodeURIComponent(hash < 0 ? raw : raw.slice(0, hash));
        const anchor = hash < 0 ? undefined : decodeURIComponent(raw.slice(hash + 1));
        const resolved = target === "" ? file : path.resolve(path.dirname(file), target);
        if (!fs.existsSync(resolved)) {
          broken.push(`${where}:${number}: ${raw} (no such file)`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith(".md") && !anchors(resolved).has(anchor.toLowerCase())) {
          broken.push(`${where}:${number}: ${raw} (no heading with that anchor)`);
        }
      }
    }
  }
  return broken;
}

describe("the documentation's links", () => {
  it("makes GitHub's anchors from headings", () => {
    expect(slug("Paying with x402 from JavaScript")).to.equal("paying-with-x402-from-javascript");
    expect(slug("Egress policy: which skill backends the gateway may reach")).to.equal(
      "egress-policy-which-skill-backends-the-gateway-may-reach",
    );
    expect(slug("Card top-ups (sandbox)")).to.equal("card-top-ups-sandbox");
    expect(slug("Hosted MCP: `POST /mcp`")).to.equal("hosted-mcp-post-mcp");
    expect(slug("Retries, and work done twice")).to.equal("retries-and-work-done-twice");
  });

  it("finds a link to a missing page and to a missing heading", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "docs-links-"));
    try {
      fs.writeFileSync(
        path.join(dir, "a.md"),
        "# A\n\n## Its part\n\n[ok](#its-part) [gone](b.md) [bad](#nothing)\n\n```\n[code](c.md)\n```\n",
      );
      expect(brokenLinks(dir)).to.deep.equal(["a.md:5: b.md (no such file)", "a.md:5: #nothing (no heading with that anchor)"]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reach an existing file, and an existing heading, from every Markdown file of the repository", () => {
    expect(brokenLinks()).to.deep.equal([]);
  });
});
