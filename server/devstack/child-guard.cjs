// Preloaded (node -r) into every child process the local development stack spawns (the chain
// node, the bundler), by spawnGuarded() in ./child-process.ts. Plain CommonJS, so it loads
// before anything else in the child, whatever the child's own module system.
//
// 1. The child goes when its parent goes, however the parent goes: a parent killed with
//    SIGKILL runs no cleanup, so the child watches for itself. When its parent dies, the child
//    is re-parented (to init or a subreaper) and process.ppid changes.
// 2. Every server the child opens listens on loopback only. Some tools hard-code 0.0.0.0
//    (Alto does), which would put a development chain's bundler on every network the machine
//    is on.
// 3. With SKILL_GATEWAY_ANNOUNCE_LISTEN=1 in its environment, the child says on stderr when each of
//    its servers listens ("child-guard: listening on 127.0.0.1:PORT"): the parent then knows an
//    answer on that port is the child's, not that of another process that took the port first.
"use strict";
const net = require("node:net");

const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(1);
}, 250).unref();

const WILDCARD = new Set([undefined, null, "", "0.0.0.0", "::", "::0", "0:0:0:0:0:0:0:0"]);
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function guardedListen(...args) {
  const first = args[0];
  if (first !== null && typeof first === "object" && !Array.isArray(first) && first.path === undefined && !(first instanceof net.Server)) {
    // listen({ port, host, ... })
    if (WILDCARD.has(first.host)) args[0] = { ...first, host: "127.0.0.1" };
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first)) || first === undefined) {
    // listen(port[, host][, backlog][, callback])
    if (typeof args[1] === "string") {
      if (WILDCARD.has(args[1])) args[1] = "127.0.0.1";
    } else {
      args.splice(1, 0, "127.0.0.1");
    }
  }
  if (process.env.SKILL_GATEWAY_ANNOUNCE_LISTEN === "1") {
    this.once("listening", () => {
      const address = this.address();
      if (address !== null && typeof address === "object")
        process.stderr.write(`child-guard: listening on ${address.address}:${address.port}\n`);
    });
  }
  return listen.apply(this, args);
};
