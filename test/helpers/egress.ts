import { type BackendOwner, EgressPolicy, type EgressSettings, type HostResolver, normalizeOrigin } from "../../server/gateway/egress";

/**
 * The egress policy with stand-ins for the public internet. A seller's listing must name a public backend, and no
 * test can run one, so a test names loopback origins that every skill may reach, a seller's own listing included,
 * as it would reach a backend on the internet. Everything else is the gateway's policy unchanged: the operator's
 * allowlist still serves the operator's skills alone. Only tests build one (through GatewayOptions.egress); no
 * setting reaches it.
 */
export class PublicStandInEgress extends EgressPolicy {
  private readonly standIns: Set<string>;

  constructor(settings: EgressSettings, standIns: readonly string[], resolve?: HostResolver) {
    super(settings, resolve);
    this.standIns = new Set(standIns.map(normalizeOrigin));
  }

  protected override exempt(origin: string, owner: BackendOwner): boolean {
    return this.standIns.has(normalizeOrigin(origin)) || super.exempt(origin, owner);
  }
}
