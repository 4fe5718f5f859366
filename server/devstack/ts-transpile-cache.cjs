// A ts-node transpiler (its "transpiler" option: https://typestrong.org/ts-node/docs/transpilers) that is
// TypeScript's own transpileModule, with each file's output kept on disk, keyed by what determines it: the
// TypeScript version, the compiler options, the file's name and its exact source. A process that loads
// TypeScript files loaded before (a test's child process, `npm run serve` started again by a test) reads
// them instead of compiling them again: server/main.ts alone is some 170 files, 6 to 8 s of CPU per process
// to compile, 1.5 s to read back. The output is what ts-node's own transpile-only compilation gives, byte
// for byte, source map included (compared over every TypeScript file of the repository); a file whose
// transpilation reports a diagnostic is never stored, so its error is reported on every load.
//
// Registered by ./ts-register.cjs. The cache lives in the OS's temporary directory (SKILL_GATEWAY_TS_CACHE
// names another, "off" turns it off); anything that cannot be read or written there is compiled as usual.
"use strict";
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const setting = process.env.SKILL_GATEWAY_TS_CACHE;
const uid = typeof process.getuid === "function" ? process.getuid() : "user";
const CACHE_DIR = setting && setting !== "off" ? setting : path.join(os.tmpdir(), `skill-gateway-ts-cache-${uid}`);

exports.create = function create({ service, nodeModuleEmitKind }) {
  const typescript = require(service.projectLocalResolveHelper(service.options.compiler || "typescript", true));
  const compilerOptions = service.config.options;
  const salt = crypto
    .createHash("sha256")
    .update(JSON.stringify([typescript.version, compilerOptions, nodeModuleEmitKind ?? null]))
    .digest("hex");
  const enabled = setting !== "off";

  const compile = (input, fileName) => typescript.transpileModule(input, { fileName, compilerOptions, reportDiagnostics: true });

  return {
    transpile(input, { fileName }) {
      if (!enabled) return compile(input, fileName);
      const key = crypto.createHash("sha256").update(salt).update("\0").update(fileName).update("\0").update(input).digest("hex");
      const file = path.join(CACHE_DIR, key.slice(0, 2), `${key}.json`);
      try {
        const cached = JSON.parse(fs.readFileSync(file, "utf8"));
        if (typeof cached.outputText === "string") return cached;
      } catch {
        // Not there yet (or unreadable): compiled below.
      }
      const result = compile(input, fileName);
      if (!result.diagnostics || result.diagnostics.length === 0) {
        try {
          fs.mkdirSync(path.dirname(file), { recursive: true });
          // Written aside, then renamed into place: a process reading it at the same time sees all or nothing.
          const temporary = `${file}.${process.pid}.${crypto.randomBytes(4).toString("hex")}`;
          fs.writeFileSync(temporary, JSON.stringify({ outputText: result.outputText, sourceMapText: result.sourceMapText }));
          fs.renameSync(temporary, file);
        } catch {
          // A cache that cannot be written costs only the time it would have saved.
        }
      }
      return result;
    },
  };
};
