import type { Request } from "express";
import type { Config } from "../config";

/**
 * The origin links and redirect URIs are built on: PUBLIC_URL, or else this server's own
 * loopback address. Never the request's Host header: a forged Host would otherwise put an
 * attacker's origin into a sign-in link mailed to someone else.
 */
export function publicBase(config: Config, req: Request): string {
  if (config.publicUrl) return config.publicUrl.replace(/\/+$/, "");
  const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  return `http://${host.includes(":") ? `[${host}]` : host}:${req.socket.localPort}`;
}
