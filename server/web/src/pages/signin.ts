/**
 * Sign in / sign up: a browser wallet (SIWE), an e-mail link, GitHub or Google. The first
 * sign-in creates the account; the API decides, the page only asks.
 */

import { ApiFailure, get, post } from "../api";
import { busy, card, h, muted } from "../dom";
import { NO_WALLET, personalSign, provider, requestAccount, walletError } from "../ethereum";
import { type PageContext, pageHeader } from "../page";
import { refreshMe } from "../session";
import type { Platform } from "../types";

export async function signinPage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("Sign in", "New here? Signing in the first time creates your account, with its own USDC wallet."));
  if (ctx.me)
    ctx.root.append(
      h("p", { class: "muted" }, `You are signed in as ${ctx.me.name}. Signing in another way adds that way to this account.`),
    );

  const grid = h("div", { class: "grid grid-2" });
  ctx.root.append(grid);
  grid.append(walletCard(ctx), emailCard(ctx));
  const oauth = h("div", { class: "oauth" });
  grid.append(card("Or continue with", oauth));
  oauth.append(muted("Loading…"));

  try {
    const platform = await get<Platform>("/v1/platform");
    oauth.replaceChildren();
    if (platform.sign_in?.github)
      oauth.append(h("a", { class: "btn btn-wide", href: "/auth/github/start", testid: "github-button" }, "Continue with GitHub"));
    if (platform.sign_in?.google)
      oauth.append(h("a", { class: "btn btn-wide", href: "/auth/google/start", testid: "google-button" }, "Continue with Google"));
    if (!oauth.hasChildNodes()) oauth.append(muted("GitHub and Google sign-in are not set up on this gateway."));
  } catch (error) {
    oauth.replaceChildren(muted("GitHub and Google sign-in are unavailable right now."));
    ctx.fail(error);
  }
}

function walletCard(ctx: PageContext): HTMLElement {
  const button = h("button", { type: "button", class: "btn btn-primary btn-wide", testid: "siwe-button" }, "Connect wallet");
  const error = h("p", { class: "field-error", testid: "siwe-error", role: "alert" });
  error.hidden = true;
  // Offered only when a signed-in person's wallet belongs to another account: switching is their call, never automatic.
  const switchButton = h(
    "button",
    { type: "button", class: "btn btn-wide", testid: "siwe-switch", hidden: true },
    "Switch to that wallet's account",
  );
  const say = (text: string) => {
    error.textContent = text;
    error.hidden = text === "";
  };
  if (!provider()) say(NO_WALLET);

  const signIn = async (switchAccount: boolean): Promise<void> => {
    say("");
    switchButton.hidden = true;
    if (!provider()) return say(NO_WALLET);
    try {
      const address = await requestAccount();
      const nonce = await get<{ message?: string }>(`/auth/siwe/nonce?address=${encodeURIComponent(address)}`);
      if (typeof nonce.message !== "string") return say("The gateway sent no message to sign; try again later.");
      let signature: string;
      try {
        signature = await personalSign(nonce.message, address);
      } catch (e) {
        return say(walletError(e));
      }
      await post(
        "/auth/siwe/verify",
        switchAccount ? { message: nonce.message, signature, switch_account: true } : { message: nonce.message, signature },
      );
      await refreshMe();
      ctx.navigate("/wallet");
    } catch (e) {
      if (e instanceof ApiFailure && e.code === "identity_taken" && ctx.me) {
        say(
          `This wallet signs in to another account, so it was not added to yours (${ctx.me.name}). Switch to that account? You sign the message again; this browser then leaves ${ctx.me.name}.`,
        );
        switchButton.hidden = false;
        return;
      }
      // An API refusal is the gateway's sentence; anything else came from the wallet.
      say(e instanceof ApiFailure ? e.message : walletError(e));
    }
  };
  button.addEventListener("click", () => busy(button, () => signIn(false)));
  switchButton.addEventListener("click", () => busy(switchButton, () => signIn(true)));
  return card(
    "Browser wallet",
    h("p", {}, "Sign a message with your Ethereum wallet (Sign-In With Ethereum). No transaction, no gas."),
    button,
    error,
    switchButton,
  );
}

/** The e-mail form: asks for a one-time link (also shown on a used or expired link's page). */
export function emailCard(ctx: PageContext): HTMLElement {
  const input = h("input", {
    type: "email",
    name: "email",
    required: true,
    autocomplete: "email",
    placeholder: "you@example.com",
    testid: "email-input",
  });
  const submit = h("button", { type: "submit", class: "btn btn-primary", testid: "email-submit" }, "Send link");
  const sent = h("p", { class: "success", testid: "email-sent", role: "status" });
  sent.hidden = true;
  const form = h("form", { class: "inline-form" }, input, submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void busy(submit, async () => {
      try {
        const answer = await post<{ message?: string }>("/auth/email/start", { email: input.value.trim() });
        sent.textContent = answer.message ?? "Check your inbox for a sign-in link.";
        sent.hidden = false;
      } catch (error) {
        ctx.fail(error);
      }
    });
  });
  return card("E-mail", h("p", {}, "We send you a one-time link. No password."), form, sent);
}
