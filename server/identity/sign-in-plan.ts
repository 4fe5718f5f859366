/**
 * What a verified sign-in may do to the browser it arrives in: the one rule every sign-in
 * (e-mail link, SIWE, GitHub, Google) follows, so that a session is never replaced behind
 * its owner's back. Pure, so that the whole rule is one table in its test.
 *
 * Why it matters: "login CSRF" is another site (or a planted link) making a signed-in
 * browser complete a sign-in with the attacker's identity. Without this rule the victim's
 * session silently becomes the attacker's account, and what the victim then does there
 * (a card top-up, a new API key, a payout address) lands in the attacker's hands.
 */

export type PlanSignInParameters = {
  /** The account of the browser's live session, if it has one. */
  current: string | undefined;
  /** The account the verified identity already signs in to, if any. */
  owner: string | undefined;
  /**
   * The account the sign-in was started to add the identity to: the e-mail link's or OAuth
   * state's `link_to`, or, for SIWE, the session the request was made in. It counts only
   * when it is `current`: a link opened in another browser signs in, it does not link.
   */
  linkTo: string | undefined;
  /** The request explicitly asked to leave `current` for the identity's own account. */
  switchAccount: boolean;
};

export type PlanSignInReturnType =
  | {
      ok: true;
      /** What to pass to Sessions.signIn: the account a new identity joins, else undefined. */
      linkTo: string | undefined;
      /** The browser's session stays as it is (it is already the right account's). */
      keepsSession: boolean;
    }
  | {
      ok: false;
      /**
       * session_exists: the browser is signed in to another account than the one this
       * sign-in is for, and did not ask to switch. identity_taken: it asked to add the
       * identity to its account, and the identity already belongs to another one.
       */
      reason: "session_exists" | "identity_taken";
    };

/**
 * Decides a sign-in, in this order: no session → sign in (or up); the identity is already
 * the session's → nothing changes; an explicit switch → sign in to the identity's account
 * (or a new one), the old session ends; started to link from this very session → link, or
 * identity_taken if another account has it; anything else → session_exists.
 */
export function planSignIn(parameters: PlanSignInParameters): PlanSignInReturnType {
  const { current, owner, linkTo, switchAccount } = parameters;
  if (current === undefined) return { ok: true, linkTo: undefined, keepsSession: false };
  if (owner === current) return { ok: true, linkTo: undefined, keepsSession: true };
  if (switchAccount) return { ok: true, linkTo: undefined, keepsSession: false };
  if (linkTo === current)
    return owner === undefined ? { ok: true, linkTo: current, keepsSession: true } : { ok: false, reason: "identity_taken" };
  return { ok: false, reason: "session_exists" };
}
