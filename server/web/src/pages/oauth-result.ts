/**
 * A GitHub or Google sign-in that did not complete (/signin/oauth?provider=…&outcome=…): the
 * gateway's callback sends a browser here instead of answering JSON. Only known providers and
 * outcome codes are shown, each with words of this page's own: nothing from the query string
 * is written into the page.
 */

import { post } from "../api";
import { busy, card, h } from "../dom";
import { type PageContext, pageHeader } from "../page";
import { forget } from "../session";

const PROVIDERS: Record<string, string> = { github: "GitHub", google: "Google" };

/** What each outcome means, in words; `switchable`: another account is involved, and signing out first is the way on. */
function explain(outcome: string, label: string, me: string | null): { text: string; switchable: boolean } {
  const signedInAs = me ? ` as ${me}` : "";
  switch (outcome) {
    case "session_exists":
      return {
        text: `This browser is signed in${signedInAs}, and the ${label} account you chose belongs to another account (or would start a new one). It was not used, so you are still signed in${signedInAs}.`,
        switchable: true,
      };
    case "identity_taken":
      return {
        text: `This ${label} account already signs in to another account, so it was not added to yours${signedInAs ? `, you are still signed in${signedInAs}` : ""}.`,
        switchable: true,
      };
    case "origin_refused":
      return {
        text: `A ${label} sign-in was started from another site, so it was not followed. If you meant to sign in, continue from here.`,
        switchable: false,
      };
    case "rate_limited":
      return { text: `Too many sign-ins are under way right now. Try again in a few minutes.`, switchable: false };
    case "sign_in_unavailable":
      return { text: `${label} could not be reached. Try again in a moment.`, switchable: false };
    default:
      return {
        text: `The ${label} sign-in did not complete: it was cancelled, took too long, or was finished in another browser. Try again.`,
        switchable: false,
      };
  }
}

export function oauthResultPage(ctx: PageContext): void {
  const query = new URLSearchParams(location.search);
  const provider = query.get("provider") ?? "";
  const label = PROVIDERS[provider];
  ctx.root.append(pageHeader("Sign-in not completed"));
  if (!label) {
    ctx.root.append(card(null, h("p", {}, "The sign-in did not complete."), h("a", { class: "btn", href: "/signin" }, "Back to sign-in")));
    return;
  }
  const { text, switchable } = explain(query.get("outcome") ?? "", label, ctx.me?.name ?? null);
  const start = `/auth/${provider}/start`;
  const actions = h("div", { class: "choice" });
  if (switchable && ctx.me) {
    // Signing out first is what makes the next sign-in a sign-in rather than a link or a conflict.
    const button = h("button", { type: "button", class: "btn btn-primary", testid: "oauth-switch" }, `Sign out and continue with ${label}`);
    button.addEventListener(
      "click",
      () =>
        void busy(button, async () => {
          try {
            await post("/auth/logout");
          } catch (error) {
            return ctx.fail(error);
          }
          forget();
          location.assign(start);
        }),
    );
    actions.append(button, h("a", { class: "btn", href: "/wallet", testid: "oauth-stay" }, "Stay signed in"));
  } else {
    actions.append(
      h("a", { class: "btn btn-primary", href: start, testid: "oauth-retry" }, `Continue with ${label}`),
      h("a", { class: "btn", href: "/signin" }, "Other ways to sign in"),
    );
  }
  ctx.root.append(card(null, h("p", { testid: "oauth-outcome" }, text), actions));
}
