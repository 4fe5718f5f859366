import fs from "node:fs";
import path from "node:path";
import { expect } from "chai";

const ROOT = path.resolve(__dirname, "../..");

/**
 * Node 20 keeps every AsyncLocalStorage that has ever run in one list and walks it on every promise and async
 * resource the process makes, until the storage is disabled. One made per object (a database, a gateway) therefore
 * makes every later promise of the process cost more for each object ever made: a test worker that had opened a
 * few hundred databases ran its suites two to four times slower. So each AsyncLocalStorage is made once, at the top
 * level of its module, and its store says which object a context belongs to (server/db/sqlite-database.ts's TURN).
 */
const MADE = /new\s+AsyncLocalStorage\b/g;
/** A declaration at a module's top level: `const X = new AsyncLocalStorage<T>();`, exported or not. */
const TOP_LEVEL = /^(export\s+)?const\s+\w+\s*=\s*new\s+AsyncLocalStorage\b/;

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" || entry.name === "dist" ? [] : sourceFiles(full);
    return /\.(ts|cjs|js)$/.test(entry.name) ? [full] : [];
  });
}

/** Every `file:line: text` where an AsyncLocalStorage is made anywhere but a module's top level. */
function storagesMadePerObject(file: string, source: string): string[] {
  const lines = source.split("\n");
  return [...source.matchAll(MADE)]
    .map((match) => source.slice(0, match.index).split("\n").length)
    .filter((line) => !TOP_LEVEL.test(lines[line - 1]))
    .map((line) => `${file}:${line}: ${lines[line - 1].trim()}`);
}

describe("AsyncLocalStorage is made once per module, never per object", () => {
  it("finds none made inside a class, a function or a loop in the server or the clients", () => {
    const files = [...sourceFiles(path.join(ROOT, "server")), ...sourceFiles(path.join(ROOT, "clients"))];
    const found = files.flatMap((file) => storagesMadePerObject(path.relative(ROOT, file), fs.readFileSync(file, "utf8")));
    expect(found).to.deep.equal([]);
  });

  it("recognises one made per object, as the SQLite database once did", () => {
    const source = ["class Db {", "  private readonly context = new AsyncLocalStorage<object>();", "}", ""].join("\n");
    expect(storagesMadePerObject("db.ts", source)).to.deep.equal(["db.ts:2: private readonly context = new AsyncLocalStorage<object>();"]);
    expect(storagesMadePerObject("ok.ts", "const TURN = new AsyncLocalStorage<object>();\n")).to.deep.equal([]);
  });
});
