import { Rng } from "../random";

/** The skills the chaos gateway serves, each on a route of the test backend (../backend.ts). */
export const CHAOS_SKILLS = [
  { slug: "chaos-fast", backendPath: "/echo", priceMicros: 1_000n, weight: 6 },
  { slug: "chaos-slow", backendPath: "/slow", priceMicros: 2_500n, weight: 3 },
  // Answers 500: the call is released, its idempotency key given up, nobody charged.
  { slug: "chaos-fail", backendPath: "/fail", priceMicros: 1_500n, weight: 1 },
] as const;

export type ChaosSkill = (typeof CHAOS_SKILLS)[number];

/** An answer as a client heard it, whole. */
export interface HeardResponse {
  status: number;
  body: string;
  /** The x-call-id header: present on every answer of a call that ran (a replay has none). */
  callId: string | undefined;
  replayed: boolean;
}

/** One call a client sent, and what became of it. */
export interface SentCall {
  cycle: number;
  skill: ChaosSkill;
  /** The gateway (or the cluster's replica) it was sent to. */
  gatewayUrl: string;
  /** When it was sent and when its answer was whole (Date.now()). */
  sentAtMs: number;
  answeredAtMs?: number;
  /** The request path: POST /v1/call or POST /v1/skills/:slug/call. */
  path: string;
  /** The raw request body; a retry resends it byte for byte (the idempotency hash covers the bytes). */
  body: string;
  /** Unique to the call, in its input: the echo sends it back and the backend's log maps call ids to it. */
  nonce: string;
  idempotencyKey: string | undefined;
  /** Still waiting, answered (whole), or lost (the connection died with the gateway). */
  state: "in_flight" | "answered" | "lost";
  /** Whether the call was still waiting when the gateway was killed. */
  inFlightAtKill: boolean;
  response?: HeardResponse;
  /** The answer to its retry after the restart, for a call with an idempotency key. */
  retry?: HeardResponse;
}

/**
 * Sends one call (or its retry) and reads its whole answer; throws if the connection dies first, or if the whole
 * answer takes longer than `timeoutMs` when one is given.
 */
export async function postCall(
  gatewayUrl: string,
  apiKey: string,
  call: Pick<SentCall, "path" | "body" | "idempotencyKey">,
  timeoutMs?: number,
): Promise<HeardResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
  if (call.idempotencyKey !== undefined) headers["idempotency-key"] = call.idempotencyKey;
  const signal = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
  const response = await fetch(gatewayUrl + call.path, { method: "POST", headers, body: call.body, signal });
  const body = await response.text();
  return {
    status: response.status,
    body,
    callId: response.headers.get("x-call-id") ?? undefined,
    replayed: response.headers.get("idempotent-replayed") === "true",
  };
}

/** A seed of its own for each client of each cycle, so a client's calls replay whatever the interleaving. */
function clientSeed(cycleSeed: number, client: number): number {
  return (cycleSeed ^ Math.imul(client + 1, 0x85ebca6b)) >>> 0;
}

/**
 * Concurrent clients calling the gateway in a loop, one call at a time each, until halted. Each call picks
 * a skill, an endpoint and whether it carries an Idempotency-Key from its client's seeded draw. With several
 * gateway URLs (a cluster's replicas), client k calls the (k mod n)-th.
 */
export class Traffic {
  readonly calls: SentCall[] = [];
  answered = 0;
  private halted = false;
  private readonly inFlight = new Set<SentCall>();
  private readonly loops: Promise<void>[] = [];
  private readonly gatewayUrls: readonly string[];

  constructor(
    gatewayUrls: string | readonly string[],
    private readonly apiKey: string,
    private readonly run: number,
    private readonly cycle: number,
    cycleSeed: number,
    clients: number,
    /** A call whose whole answer takes longer is given up by its client (and counted lost); none by default. */
    private readonly timeoutMs?: number,
  ) {
    this.gatewayUrls = typeof gatewayUrls === "string" ? [gatewayUrls] : gatewayUrls;
    for (let client = 0; client < clients; client++) this.loops.push(this.client(client, new Rng(clientSeed(cycleSeed, client))));
  }

  /** Stops every client from sending another call; the calls still waiting complete as they will. */
  stop(): void {
    this.halted = true;
  }

  /** Stops every client from sending another call; returns the calls still waiting, marked in flight at the kill. */
  halt(): SentCall[] {
    this.halted = true;
    const waiting = [...this.inFlight];
    for (const call of waiting) call.inFlightAtKill = true;
    return waiting;
  }

  /** Resolves once every client has stopped and every call is answered or lost. */
  async settled(): Promise<void> {
    await Promise.all(this.loops);
  }

  private async client(client: number, random: Rng): Promise<void> {
    for (let n = 0; !this.halted; n++) {
      const skill = random.weighted(CHAOS_SKILLS.map((s) => [s, s.weight] as const));
      const nonce = `r${this.run}-c${this.cycle}-k${client}-n${n}`;
      const input = { nonce };
      const perSkill = random.chance(0.5);
      const call: SentCall = {
        cycle: this.cycle,
        skill,
        gatewayUrl: this.gatewayUrls[client % this.gatewayUrls.length],
        sentAtMs: Date.now(),
        path: perSkill ? `/v1/skills/${skill.slug}/call` : "/v1/call",
        body: JSON.stringify(perSkill ? input : { skill_id: skill.slug, input }),
        nonce,
        idempotencyKey: random.chance(0.5) ? `chaos-${nonce}` : undefined,
        state: "in_flight",
        inFlightAtKill: false,
      };
      this.calls.push(call);
      this.inFlight.add(call);
      try {
        call.response = await postCall(call.gatewayUrl, this.apiKey, call, this.timeoutMs);
        call.state = "answered";
        this.answered++;
      } catch {
        call.state = "lost";
      } finally {
        call.answeredAtMs = Date.now();
        this.inFlight.delete(call);
      }
    }
  }
}
