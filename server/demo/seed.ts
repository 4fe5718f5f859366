import type { Gateway } from "../index";
import { usdToMicros } from "../ledger/money";
import type { DemoBackend } from "./backend";

export const DEMO_BUYER_ID = "demo-buyer";
export const DEMO_SELLER_ID = "demo-seller";
/** The demo buyer's starting balance, credited once by the dev_credit seed step. */
export const DEMO_CREDIT_USD = "10";

const DEMO_SKILLS = [
  { slug: "echo", path: "/echo", name: "Echo", price: "0.001", description: "Returns its input unchanged." },
  {
    slug: "uppercase", path: "/uppercase", name: "Uppercase", price: "0.002",
    description: "Upper-cases a text.",
    inputSchema: { type: "object", properties: { text: { type: "string", maxLength: 10_000 } }, required: ["text"], additionalProperties: false },
  },
  { slug: "slow", path: "/slow", name: "Slow", price: "0.001", description: "Waits `ms` milliseconds; times out past 2 s.", timeoutMs: 2_000 },
  { slug: "broken", path: "/broken", name: "Broken", price: "0.01", description: "Its backend always answers 500: calls are never charged." },
] as const;

/**
 * Seeds the embedded default: a demo seller with the demo skills (pointed at the demo
 * backend), and a demo buyer. The buyer's balance is a `dev_credit` entry in the ledger,
 * made once, never a deposit: until the chain is joined to the ledger there is no other
 * way in for money.
 */
export function seedDemo(gateway: Gateway, backend: DemoBackend): { buyerId: string; credited: boolean } {
  const { ledger, skills } = gateway;
  ledger.ensureAccount({ id: DEMO_SELLER_ID, kind: "seller", name: "Demo Seller" });
  const isNew = ledger.getAccount(DEMO_BUYER_ID) === undefined;
  ledger.ensureAccount({ id: DEMO_BUYER_ID, kind: "user", name: "Demo Buyer" });
  if (isNew) ledger.credit(DEMO_BUYER_ID, usdToMicros(DEMO_CREDIT_USD), "dev_credit", "demo balance seeded by npm start");

  for (const s of DEMO_SKILLS) {
    const skill = skills.upsert({
      slug: s.slug,
      name: s.name,
      description: s.description,
      priceMicros: usdToMicros(s.price),
      sellerAccountId: DEMO_SELLER_ID,
      backendUrl: backend.url + s.path,
      timeoutMs: "timeoutMs" in s ? s.timeoutMs : gateway.config.defaultSkillTimeoutMs,
      inputSchema: "inputSchema" in s ? s.inputSchema : null,
    });
    backend.setSecret(s.path, skill.signingSecret);
  }
  ledger.commit.flush();
  return { buyerId: DEMO_BUYER_ID, credited: isNew };
}
