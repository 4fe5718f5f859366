import { expect } from "chai";
import { type PlanSignInParameters, type PlanSignInReturnType, planSignIn } from "../../server/identity/sign-in-plan";

const A = "acct-a";
const B = "acct-b";

/**
 * Every case of the rule, as [what, parameters, decision]: the browser's session (`current`),
 * the account the verified identity belongs to (`owner`), the account the sign-in was started
 * to add it to (`linkTo`), and whether the request asked to switch.
 */
const TABLE: Array<[string, PlanSignInParameters, PlanSignInReturnType]> = [
  [
    "signs a signed-out browser up",
    { current: undefined, owner: undefined, linkTo: undefined, switchAccount: false },
    { ok: true, linkTo: undefined, keepsSession: false },
  ],
  [
    "signs a signed-out browser in",
    { current: undefined, owner: B, linkTo: undefined, switchAccount: false },
    { ok: true, linkTo: undefined, keepsSession: false },
  ],
  [
    "does not link to an account whose session is not this browser's (a forwarded or planted link)",
    { current: undefined, owner: undefined, linkTo: A, switchAccount: false },
    { ok: true, linkTo: undefined, keepsSession: false },
  ],
  [
    "keeps the session when the identity is already its account's",
    { current: A, owner: A, linkTo: undefined, switchAccount: false },
    { ok: true, linkTo: undefined, keepsSession: true },
  ],
  [
    "links a new identity when started from this very session",
    { current: A, owner: undefined, linkTo: A, switchAccount: false },
    { ok: true, linkTo: A, keepsSession: true },
  ],
  [
    "refuses to link an identity another account has",
    { current: A, owner: B, linkTo: A, switchAccount: false },
    { ok: false, reason: "identity_taken" },
  ],
  [
    "refuses to replace the session with another account's silently",
    { current: A, owner: B, linkTo: undefined, switchAccount: false },
    { ok: false, reason: "session_exists" },
  ],
  [
    "refuses to replace the session with a new account silently",
    { current: A, owner: undefined, linkTo: undefined, switchAccount: false },
    { ok: false, reason: "session_exists" },
  ],
  [
    "refuses a link started from another session of another account",
    { current: A, owner: undefined, linkTo: B, switchAccount: false },
    { ok: false, reason: "session_exists" },
  ],
  [
    "switches to the identity's account when asked",
    { current: A, owner: B, linkTo: undefined, switchAccount: true },
    { ok: true, linkTo: undefined, keepsSession: false },
  ],
  [
    "switches to a new account when asked",
    { current: A, owner: undefined, linkTo: undefined, switchAccount: true },
    { ok: true, linkTo: undefined, keepsSession: false },
  ],
  [
    "switches rather than links when asked, even from the linking session",
    { current: A, owner: B, linkTo: A, switchAccount: true },
    { ok: true, linkTo: undefined, keepsSession: false },
  ],
  [
    "keeps the session when asked to switch to the account it already is",
    { current: A, owner: A, linkTo: undefined, switchAccount: true },
    { ok: true, linkTo: undefined, keepsSession: true },
  ],
];

describe("planSignIn: what a sign-in may do to the browser's session", () => {
  for (const [what, parameters, decision] of TABLE) {
    it(what, () => {
      expect(planSignIn(parameters)).to.deep.equal(decision);
    });
  }
});
