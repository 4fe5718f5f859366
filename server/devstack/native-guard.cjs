// Runs a native program (a server binary such as redis-server) as the child of a small Node.js
// process that spawnNativeGuarded() in ./native-child.ts starts with ./child-guard.cjs preloaded.
// A native binary cannot be given that preload, so this process stands between: the guard makes
// it exit when the process that started it dies (SIGKILL included), and on its way out it kills
// the program. Signals asking it to stop are passed on, and it exits as the program exited.
//
//   node --require child-guard.cjs native-guard.cjs <binary> [args...]
"use strict";
const { spawn } = require("node:child_process");

const [binary, ...args] = process.argv.slice(2);
if (!binary) {
  process.stderr.write("native-guard: no program given\n");
  process.exit(2);
}

const child = spawn(binary, args, { stdio: "inherit" });

// However this process ends (the guard's exit when its parent died included), the program goes too.
process.on("exit", () => {
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.on(signal, () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  });
}
child.on("error", (error) => {
  process.stderr.write(`native-guard: cannot start ${binary}: ${error.message}\n`);
  process.exit(127);
});
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
