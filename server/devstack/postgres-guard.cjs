// Runs one program of a throwaway PostgreSQL server (initdb, then postgres) for ./postgres.ts, and
// makes sure it does not outlive the test process that asked for it. Plain CommonJS, run by this
// Node.js binary with no loader, so it starts in milliseconds.
//
// Why a process between the test and the server: a test process killed with SIGKILL runs no
// cleanup, and postgres (not a Node.js program, so ../../server/devstack/child-guard.cjs cannot be
// preloaded into it) would keep its port, its shared memory and its data directory forever. This
// guard watches its own parent as child-guard.cjs does (re-parenting changes process.ppid); when
// the parent is gone it stops the program, then removes the directories it was told to remove.
//
// Why not `runuser -u postgres -- postgres`: runuser stays between its caller and the program and
// does not pass every signal on (it ignores SIGQUIT), so a fast or immediate shutdown would not
// reach the postmaster. As root, this guard starts the program directly under the unprivileged
// user's uid and gid instead (libuv drops the supplementary groups), so signals reach it.
//
// argv[2] is JSON: { command, args, uid?, gid?, stopSignal, stopTimeoutMs, removeWhenOrphaned }.
// On SIGTERM or SIGINT, or when orphaned, it sends `stopSignal` to the program, SIGKILL after
// `stopTimeoutMs`, and exits once the program has; when orphaned it also removes `removeWhenOrphaned`.
// When the program exits by itself, the guard exits with its code.
"use strict";
const { spawn } = require("node:child_process");
const fs = require("node:fs");

const spec = JSON.parse(process.argv[2]);
const parent = process.ppid;

const child = spawn(spec.command, spec.args, {
  stdio: ["ignore", "inherit", "inherit"],
  uid: spec.uid,
  gid: spec.gid,
  cwd: spec.cwd,
  env: spec.env,
});

let stopping = false;
let orphaned = false;

function stop() {
  if (stopping) return;
  stopping = true;
  if (child.exitCode === null && child.signalCode === null) {
    try {
      child.kill(spec.stopSignal);
    } catch {
      // Already gone: the exit handler below finishes.
    }
    setTimeout(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }, spec.stopTimeoutMs).unref();
  }
}

child.on("error", (err) => {
  process.stderr.write(`postgres-guard: cannot start ${spec.command}: ${err.message}\n`);
  process.exit(127);
});

child.on("exit", (code, signal) => {
  if (orphaned) {
    for (const dir of spec.removeWhenOrphaned ?? []) fs.rmSync(dir, { recursive: true, force: true });
  }
  process.exit(stopping ? 0 : (code ?? (signal ? 128 : 1)));
});

process.on("SIGTERM", stop);
process.on("SIGINT", stop);
setInterval(() => {
  if (process.ppid !== parent) {
    orphaned = true;
    stop();
  }
}, 200);
