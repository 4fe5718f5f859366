import type { Address } from "viem";
import { linkAddress } from "../settlement/addresses";
import type { Gateway } from "../index";
import { usdToMicros } from "../ledger/money";
import { setDisplayName } from "../identity/display-name-store";
import type { DemoBackend } from "./demo-backend";

export const DEMO_BUYER_ID = "demo-buyer";
export const DEMO_SELLER_ID = "demo-seller";
/** What the demo buyer deposits into the escrow on-chain at start. */
export const DEMO_DEPOSIT_USD = "10";

const DEMO_SKILLS = [
  // The schemas' `examples` are what the dashboard's "try it" form starts with.
  {
    slug: "echo",
    path: "/echo",
    name: "Echo",
    price: "0.001",
    description: "Returns its input unchanged.",
    inputSchema: {
      type: "object",
      properties: {
        text: { type: "string", description: "Any text; other properties are echoed back too.", examples: ["Hello from Skill Gateway"] },
      },
    },
  },
  {
    slug: "uppercase",
    path: "/uppercase",
    name: "Uppercase",
    price: "0.002",
    description: "Upper-cases a text.",
    inputSchema: {
      type: "object",
      properties: { text: { type: "string", maxLength: 10_000, description: "The text to upper-case.", examples: ["hello, world"] } },
      required: ["text"],
      additionalProperties: false,
    },
  },
  {
    // Usage pricing to try: a call holds the max_price, $0.01, and is charged what its backend reports, signed:
    // $0.0001 a word of `text` ("one two three" costs $0.0003; 100 words or more, $0.01).
    slug: "wordcount",
    path: "/wordcount",
    name: "Word count",
    pricing: "usage",
    price: "0.01",
    description: "Counts the words of a text. Usage-priced: $0.0001 a word, at most $0.01 a call.",
    inputSchema: {
      type: "object",
      properties: {
        text: { type: "string", maxLength: 100_000, description: "The text whose words are counted.", examples: ["one two three"] },
      },
      required: ["text"],
      additionalProperties: false,
    },
  },
  {
    slug: "slow",
    path: "/slow",
    name: "Slow",
    price: "0.001",
    description: "Waits `ms` milliseconds; times out past 2 s.",
    timeoutMs: 2_000,
    inputSchema: {
      type: "object",
      properties: {
        ms: { type: "integer", minimum: 0, maximum: 30_000, description: "How long to wait, in milliseconds.", examples: [1_500] },
      },
    },
  },
  {
    // An output contract to try: {"text":"hi"} keeps the promise (200, charged), {"x":1} breaks it (502
    // skill_bad_output, not charged; the demo seller sees the problem in GET /v1/seller/skills/strict-echo/output-failures).
    slug: "strict-echo",
    path: "/strict-echo",
    name: "Strict echo",
    price: "0.001",
    description:
      'Returns its input unchanged, and promises an answer with a string "text": send {"x":1} to see a broken promise go unpaid.',
    inputSchema: {
      type: "object",
      properties: {
        text: { type: "string", description: "Any text; without one, the answer breaks the skill's promise.", examples: ["hi"] },
      },
    },
    outputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  },
  {
    slug: "broken",
    path: "/broken",
    name: "Broken",
    price: "0.01",
    description: "Its backend always answers 500: calls are never charged.",
  },
] as const;

/**
 * Seeds the embedded default: a demo seller with the demo skills (pointed at the demo
 * backend), and a demo buyer, each linked to its on-chain address. The buyer's balance is
 * not seeded: it is the buyer's own deposit into the escrow, which the deposit indexer
 * credits once it reads the event (a deposit already on-chain is credited on linking).
 */
export async function seedDemo(
  gateway: Gateway,
  backend: DemoBackend,
  addresses: { buyer: Address; seller: Address },
): Promise<{ buyerId: string }> {
  const { ledger, skills } = gateway;
  await ledger.ensureAccount({ id: DEMO_SELLER_ID, kind: "seller", name: "Demo Seller" });
  // The marketplace names a seller by the display name it chose, never by its account's name.
  await setDisplayName(ledger.db, DEMO_SELLER_ID, "Demo Seller");
  await ledger.ensureAccount({ id: DEMO_BUYER_ID, kind: "user", name: "Demo Buyer" });
  for (const [accountId, address] of [
    [DEMO_BUYER_ID, addresses.buyer],
    [DEMO_SELLER_ID, addresses.seller],
  ] as const) {
    const linked = await linkAddress(ledger, { accountId, address });
    if (!linked.ok) throw new Error(`could not link ${address} to ${accountId}: ${linked.reason}`);
  }

  for (const s of DEMO_SKILLS) {
    const skill = await skills.upsert({
      slug: s.slug,
      name: s.name,
      description: s.description,
      // A usage-priced skill's price is its max_price: what each call holds.
      pricing: "pricing" in s ? s.pricing : "fixed",
      priceMicros: usdToMicros(s.price),
      sellerAccountId: DEMO_SELLER_ID,
      backendUrl: backend.url + s.path,
      timeoutMs: "timeoutMs" in s ? s.timeoutMs : gateway.config.defaultSkillTimeoutMs,
      inputSchema: "inputSchema" in s ? s.inputSchema : null,
      outputSchema: "outputSchema" in s ? s.outputSchema : null,
    });
    await backend.setSecret(s.path, skill.signingSecret);
  }
  return { buyerId: DEMO_BUYER_ID };
}
