import dns from "node:dns";
import type { LookupAddress, LookupAllOptions, LookupOneOptions } from "node:dns";
import type net from "node:net";
import os from "node:os";
import ipaddr from "ipaddr.js";
import { buildConnector } from "undici";

/**
 * The egress policy: which seller backends the gateway may send a call to.
 *
 * A seller names its backend by URL, and the gateway POSTs callers' JSON there and hands
 * back the answer, so an unchecked URL would let anyone reach what the gateway's machine
 * can reach: the chain node's unlocked accounts, the bundler, the gateway itself, a cloud
 * metadata service. The rule is simple to state: a backend must be a public unicast
 * address on the internet, over http(s), without credentials in its URL, on an allowed
 * port. The operator may name exact origins that are exempt (`SKILL_BACKEND_ALLOWLIST`;
 * `npm start` names its demo backend, on loopback, and nothing else), and they are exempt for
 * the operator's own skills only (`BackendOwner`): a seller's listing on such an origin is held
 * to the public-address rule like any other, or any new account could read the operator's
 * internal service through a skill of its own.
 *
 * It is checked three times, each for its own reason:
 *   1. when a skill is listed (`checkListing`): the URL, and every address its host resolves
 *      to now, so the seller gets a clear 400;
 *   2. before a call connects (`connector`'s lookup): the addresses the host resolves to at
 *      call time, since DNS answers change (rebinding) — no connection is even attempted to
 *      a refused address;
 *   3. once connected: the socket's actual peer address, whatever path led there (an IP
 *      literal, a resolver the lookup did not see). Nothing is written to a refused socket.
 * Redirects are never followed (the forwarder treats a 3xx as a backend failure).
 *
 * Numeric spellings (2130706433, 0x7f.1, 0177.0.0.1, 127.1) are not a way around it: the
 * WHATWG URL parser reads every one of them into the dotted form before any check runs,
 * and ipaddr.js classifies the result against the IANA special-purpose registries.
 */

export interface EgressSettings {
  /** Origins (scheme://host:port) that are reachable whatever their address. */
  allowlist: readonly string[];
  /** Ports a backend may use; empty allows any port. */
  allowedPorts: readonly number[];
}

export type EgressRefusalReason = "invalid_url" | "scheme" | "credentials" | "port" | "address" | "unresolvable";

/**
 * Who set a skill's backend URL: the operator (`npm run register-skill`, the demo seed), whose skills may use the
 * allowlist, or a seller through the seller API, whose URL must be a public address whatever its origin.
 */
export type BackendOwner = "operator" | "seller";

export type EgressCheck = { ok: true; url: URL; allowlisted: boolean } | { ok: false; reason: EgressRefusalReason; message: string };

/** Resolves a host name to all its addresses (the system resolver, dns.lookup, by default). */
export type HostResolver = (hostname: string) => Promise<LookupAddress[]>;

const systemResolver: HostResolver = (hostname) => dns.promises.lookup(hostname, { all: true });

// Internal error, plain on purpose: thrown into a socket's connect callback (Node's `code` convention), and the forwarder reports it as skill_backend_forbidden.
/** Thrown into a connection attempt the policy refuses; the forwarder reports it as such. */
export class EgressRefused extends Error {
  override name = "EgressRefused";
  readonly code = "EGRESS_REFUSED";
}

/**
 * Whether `address` (an IP in any textual form ipaddr.js reads) is a public unicast address.
 * Everything in a special-purpose range is refused: loopback, private, link-local,
 * unique-local, carrier-grade NAT, multicast, broadcast, unspecified, reserved and
 * documentation ranges, and the IPv6 forms that carry an IPv4 address inside them
 * (IPv4-mapped and -compatible, NAT64, 6to4, Teredo), since those could reach any IPv4 host.
 * An IPv6 address must also be global unicast (2000::/3): what lies outside it is either
 * special (::/96, the IPv4-compatible form, which ipaddr.js calls plain unicast) or unassigned.
 */
export function isPublicAddress(address: string): boolean {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  if (!ipaddr.isValid(bare)) return false;
  const ip = ipaddr.parse(bare);
  if (ip.range() !== "unicast") return false;
  return ip.kind() === "ipv4" || ip.match(GLOBAL_UNICAST_V6);
}

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR("2000::/3") as [ipaddr.IPv6, number];

/** An address in one canonical text, so that two spellings of one address compare equal. */
function canonical(address: string): string | undefined {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  return ipaddr.isValid(bare) ? ipaddr.process(bare).toNormalizedString() : undefined;
}

/** This machine's own addresses, on every interface it has now. */
function machineAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .flatMap((i) => (i ? [i.address] : []));
}

export class EgressPolicy {
  private readonly allowlist: Set<string>;
  private readonly ports: Set<number>;
  /**
   * This machine's own addresses: a public one still leads back here, to every service bound
   * to 0.0.0.0 (the gateway itself among them), so it is refused like loopback.
   */
  private readonly own: Set<string>;

  constructor(
    settings: EgressSettings,
    private readonly resolve: HostResolver = systemResolver,
    ownAddresses: readonly string[] = machineAddresses(),
  ) {
    this.allowlist = new Set(settings.allowlist.map(normalizeOrigin));
    this.ports = new Set(settings.allowedPorts);
    this.own = new Set(ownAddresses.flatMap((address) => canonical(address) ?? []));
  }

  /** Whether a connection may go to `address`: a public address that is not this machine's. */
  reachable(address: string): boolean {
    return isPublicAddress(address) && !this.own.has(canonical(address) ?? "");
  }

  /** What can be told from the URL alone: its shape, scheme, credentials, port, and an IP literal's range. */
  checkUrl(raw: string, owner: BackendOwner): EgressCheck {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return refuse("invalid_url", "backend_url is not a valid URL");
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return refuse("scheme", "backend_url must be an http or https URL");
    if (url.username !== "" || url.password !== "") return refuse("credentials", "backend_url must not carry credentials (user:password@)");
    if (this.exempt(url.origin, owner)) return { ok: true, url, allowlisted: true };
    const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port);
    if (this.ports.size > 0 && !this.ports.has(port)) {
      return refuse("port", `backend_url's port ${port} is not allowed; allowed ports: ${[...this.ports].join(", ")}`);
    }
    const host = url.hostname;
    if (isIpLiteral(host)) {
      if (!isPublicAddress(host)) return refuse("address", addressMessage(host));
      if (!this.reachable(host)) return refuse("address", "backend_url's address is this gateway's own machine");
    } else if (isLocalName(host)) {
      return refuse("address", `backend_url's host "${host}" names this machine or its local network`);
    }
    return { ok: true, url, allowlisted: false };
  }

  /** The listing-time check: `checkUrl`, then every address the host resolves to now. */
  async checkListing(raw: string, owner: BackendOwner): Promise<EgressCheck> {
    const checked = this.checkUrl(raw, owner);
    if (!checked.ok || checked.allowlisted || isIpLiteral(checked.url.hostname)) return checked;
    let addresses: LookupAddress[];
    try {
      addresses = await this.resolve(checked.url.hostname);
    } catch {
      return refuse("unresolvable", `backend_url's host "${checked.url.hostname}" does not resolve`);
    }
    if (addresses.some((a) => isPublicAddress(a.address) && !this.reachable(a.address))) {
      return refuse("address", `backend_url's host "${checked.url.hostname}" resolves to this gateway's own machine`);
    }
    const refused = addresses.find((a) => !isPublicAddress(a.address));
    // The category, not the address: the answer must not turn listing into a lookup tool for
    // the names of the gateway's own network.
    if (refused)
      return refuse(
        "address",
        `backend_url's host "${checked.url.hostname}" resolves to ${rangeName(refused.address)}, not a public internet address`,
      );
    if (addresses.length === 0) return refuse("unresolvable", `backend_url's host "${checked.url.hostname}" does not resolve`);
    return checked;
  }

  /**
   * Whether `owner`'s calls to this origin skip the address checks: the one place the allowlist is read. The
   * operator allowlists an origin for the skills it registers itself; a seller naming the same origin gains nothing.
   */
  protected exempt(origin: string, owner: BackendOwner): boolean {
    return owner === "operator" && this.allowlist.has(normalizeOrigin(origin));
  }

  /**
   * An undici connector for one backend origin, as `owner`'s skills reach it, that enforces the
   * policy on every new connection: the resolver's answers are checked before connecting, and the
   * peer's address once connected. An origin exempt for that owner connects wherever its name
   * resolves, through the same resolver (one resolver answers for every backend).
   */
  connector(origin: string, owner: BackendOwner): buildConnector.connector {
    if (this.exempt(origin, owner))
      return buildConnector({ lookup: guardedLookup(this.resolve, () => true) } as buildConnector.BuildOptions);
    const lookup = guardedLookup(this.resolve, (address) => this.reachable(address));
    const base = buildConnector({ lookup } as buildConnector.BuildOptions);
    return (options, callback) =>
      base(options, (error, socket) => {
        if (error || !socket) return callback(error ?? new EgressRefused("no socket"), null);
        const peer = (socket as net.Socket).remoteAddress;
        if (!peer || !this.reachable(peer)) {
          socket.destroy();
          return callback(
            new EgressRefused(`backend connection reached ${peer ? whatItIs(peer) : "an unknown address"}, not a public internet address`),
            null,
          );
        }
        callback(null, socket);
      });
  }
}

/**
 * net.connect's `lookup` over `resolve`, refusing a name that resolves to any non-public
 * address (all of a name's addresses are checked, not only the one picked, so a name cannot
 * mix a public address with an internal one and let the connection race decide).
 */
function guardedLookup(resolve: HostResolver, reachable: (address: string) => boolean) {
  return (
    hostname: string,
    options: LookupOneOptions | LookupAllOptions,
    callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    resolve(hostname).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
        const refused = addresses.find((a) => !reachable(a.address));
        if (refused || wanted.length === 0) {
          return callback(
            new EgressRefused(
              refused
                ? `backend host "${hostname}" resolves to ${whatItIs(refused.address)}, not a public internet address`
                : `backend host "${hostname}" has no usable address`,
            ),
            "",
          );
        }
        if ((options as LookupAllOptions).all) return callback(null, wanted);
        callback(null, wanted[0].address, wanted[0].family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ""),
    );
  };
}

function refuse(reason: EgressRefusalReason, message: string): EgressCheck {
  return { ok: false, reason, message };
}

function isIpLiteral(host: string): boolean {
  return ipaddr.isValid(host.startsWith("[") ? host.slice(1, -1) : host);
}

/** Names that resolve to this machine or the local network without asking DNS. */
function isLocalName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  return (
    name === "localhost" || name.endsWith(".localhost") || name.endsWith(".local") || name.endsWith(".internal") || !name.includes(".")
  );
}

/** What a refused address is, for a message: its range, or this machine when the range is public. */
function whatItIs(address: string): string {
  return isPublicAddress(address) ? "this gateway's own machine" : rangeName(address);
}

function rangeName(address: string): string {
  const bare = address.startsWith("[") ? address.slice(1, -1) : address;
  if (!ipaddr.isValid(bare)) return "not an IP address";
  const range = ipaddr.parse(bare).range();
  return range === "unicast" ? "an address outside global unicast" : `a ${range} address`;
}

function addressMessage(address: string): string {
  return `backend address ${address} is not a public internet address (${rangeName(address)})`;
}

/** scheme://host[:port] as URL.origin spells it, so configured origins compare exactly. */
export function normalizeOrigin(origin: string): string {
  return new URL(origin).origin;
}
