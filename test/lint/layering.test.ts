import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "chai";

const ROOT = path.resolve(__dirname, "../..");
const DEPCRUISE = path.join(ROOT, "node_modules", ".bin", "depcruise");
const CONFIG = path.join(ROOT, ".dependency-cruiser.cjs");

/**
 * One throwaway tree holding a probe for every rule: the imports each rule must refuse, and the ones it must let
 * through, each in files of its own so that every case reads its own lines of one run's output. (The tree as it
 * stands is cruised by `npm run lint`, which `npm test` runs before its suites.)
 */
const TREE: Record<string, string> = {
  // What the probes import.
  "server/http/errors.ts": "export const x = 1;\n",
  "server/gateway/call-service.ts": "export const x = 1;\n",
  "server/devstack/local-node.ts": "export const x = 1;\n",
  "server/db/db.ts": "export type Db = { prepare(sql: string): unknown };\nexport const x = 1;\n",
  "server/text.ts": "export const x = 1;\n",
  "server/errors.ts": "export const x = 1;\n",
  "server/db/postgres/pool.ts": "export const x = 1;\n",
  "server/ledger/ledger.ts": "export const x = 1;\n",
  // The probes.
  "server/ledger/probe-http.ts": 'import { x } from "../http/errors";\nexport const y = x;\n',
  "server/ledger/probe-up.ts": 'import { x } from "../gateway/call-service";\nexport const y = x;\n',
  "server/main.ts": 'import { x } from "./devstack/local-node";\nexport const y = x;\n',
  "server/http/routes/probe.ts": 'import { x } from "../../db/db";\nexport const y = x;\n',
  "server/identity/probe-text.ts": 'import { x } from "../text";\nexport const y = x;\n',
  "server/catalog/probe-text.ts": 'import { x } from "../text";\nexport const z = x;\n',
  "server/db/probe-errors.ts": 'import { x } from "../errors";\nexport const y = x;\n',
  "server/gateway/probe-errors.ts": 'import { x } from "../errors";\nexport const z = x;\n',
  "server/identity/probe.ts": 'import { x } from "../db/db";\nexport const y = x;\n',
  "server/identity/probe-store.ts": 'import { x } from "../db/db";\nexport const z = x;\n',
  "server/identity/store.ts": 'import { x } from "../db/db";\nexport const w = x;\n',
  "server/db/leader.ts": 'import { x } from "./postgres/pool";\nexport const l = x;\n',
  "server/settlement/probe.ts": 'import { x } from "../db/postgres/pool";\nexport const y = x;\n',
  "server/gateway/probe.ts": 'import pg from "pg";\nexport const v = pg;\n',
  "server/gateway/probe-store.ts": 'import { x } from "../db/postgres/pool";\nexport const z = x;\n',
  "server/db/postgres/probe.ts": 'import { x } from "../../ledger/ledger";\nexport const y = x;\n',
  "server/ledger/probe-down.ts": 'import { x } from "../db/db";\nexport const y = x;\n',
};

describe("the import rules (.dependency-cruiser.cjs)", function () {
  this.timeout(60_000);
  let status: number | null;
  let output: string;

  before(() => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "layering-"));
    try {
      fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "commonjs" } }));
      for (const [file, source] of Object.entries(TREE)) {
        fs.mkdirSync(path.join(dir, path.dirname(file)), { recursive: true });
        fs.writeFileSync(path.join(dir, file), source);
      }
      const run = spawnSync(DEPCRUISE, ["server", "--config", CONFIG], { cwd: dir, encoding: "utf8", timeout: 60_000 });
      status = run.status;
      output = `${run.stdout}${run.stderr}`;
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("leave no known violation to ignore, and fail a tree that breaks them", () => {
    expect(fs.existsSync(path.join(ROOT, ".dependency-cruiser-known-violations.json"))).to.equal(false);
    expect(status, output).to.not.equal(0);
  });

  it("refuse the ledger importing HTTP", () => {
    expect(output).to.contain("core-never-imports-http: server/ledger/probe-http.ts → server/http/errors.ts");
  });

  it("refuse a lower layer importing a higher one", () => {
    expect(output).to.contain("ledger-sits-on-db: server/ledger/probe-up.ts → server/gateway/call-service.ts");
  });

  it("refuse production code importing the development stack", () => {
    expect(output).to.contain("devstack-only-from-scripts-and-tests: server/main.ts → server/devstack/local-node.ts");
  });

  it("refuse a route importing the database (no route runs SQL)", () => {
    expect(output).to.contain("routes-never-import-db: server/http/routes/probe.ts → server/db/db.ts");
  });

  // The accepting cases below read the absence of their probes' lines, in an output that does list violations.
  it("accept the identity and catalog layers importing the text policy (server/text.ts)", () => {
    expect(output).to.contain("server/ledger/probe-http.ts →");
    expect(output).to.not.contain("probe-text.ts →");
  });

  it("accept any layer importing the error codes and base error (server/errors.ts)", () => {
    expect(output).to.contain("server/ledger/probe-http.ts →");
    expect(output).to.not.contain("probe-errors.ts →");
  });

  it("refuse a service holding the database handle: only its module's store files do", () => {
    expect(output).to.contain("only-stores-hold-the-database: server/identity/probe.ts → server/db/db.ts");
    expect(output).to.not.contain("probe-store.ts →");
    expect(output).to.not.contain("identity/store.ts →");
  });

  it("refuse a service speaking to PostgreSQL itself: only db/, the ledger and store files do", () => {
    expect(output).to.contain("only-stores-speak-postgres: server/settlement/probe.ts → server/db/postgres/pool.ts");
    expect(output).to.match(/only-stores-speak-postgres: server\/gateway\/probe\.ts → pg\b/);
    expect(output).to.not.contain("leader.ts →");
  });

  it("refuse db/ importing anything of the domain, PostgreSQL files included", () => {
    expect(output).to.contain("db-stands-alone: server/db/postgres/probe.ts → server/ledger/ledger.ts");
  });

  it("accept an import that runs downward", () => {
    expect(output).to.contain("server/ledger/probe-http.ts →");
    expect(output).to.not.contain("probe-down.ts →");
  });
});
