/**
 * Sign in / sign up: an e-mail link, GitHub or Google when the gateway has them, or a browser
 * wallet (SIWE). The first sign-in creates the account; the API decides, the page only asks.
 * The page opens with what the product is and the way in that works for this visitor: the
 * e-mail link first, and the wallet first only when the browser has one. Nothing on it is an
 * error until the visitor has done something.
 */

import { ApiFailure, get, post } from "../api";
import { busy, card, field, h } from "../dom";
import { NO_WALLET, personalSign, provider, requestAccount, walletError } from "../ethereum";
import { type PageContext, pageHeader } from "../page";
import { refreshMe } from "../session";
import type { Platform } from "../types";

/** What the gateway is, in one sentence: the first thing a visitor reads. */
export const PRODUCT_LINE =
  "A paid gateway for AI-agent skills: your agents call any skill in the marketplace with one API key, and pay per call in USDC from a prepaid balance.";

export async function signinPage(ctx: PageContext): Promise<void> {
  const head = pageHeader("Sign in", PRODUCT_LINE);
  head.querySelector(".lead")?.setAttribute("data-testid", "product-line");
  head.append(
    h(
      "p",
      { class: "muted" },
      ctx.me
        ? `You are signed in as ${ctx.me.name}. Signing in another way adds that way to this account.`
        : "New here? Signing in the first time creates your account, with its own USDC wallet.",
    ),
  );
  ctx.root.append(head);

  // The platform says whether GitHub/Google are on, and where mail goes; the e-mail form does not wait for it.
  const platform = get<Platform>("/v1/platform").catch(() => undefined);
  const hasWallet = provider() !== undefined;
  const oauth = h("div", { class: "oauth", hidden: true });
  const email = emailForm({ email: rememberedEmail(), primary: !hasWallet, platform });
  const wallet = walletSignIn(ctx, hasWallet);
  const or = h("p", { class: "divider", "aria-hidden": "true" }, "or");
  // The way that works for this visitor first; the others after an "or".
  const ways = hasWallet ? [wallet, or, email, oauth] : [email, or, oauth, wallet];
  ctx.root.append(
    h(
      "div",
      { class: "grid grid-signin" },
      h("section", { class: "card signin-card", testid: "signin-card" }, h("h2", {}, "Sign in or create an account"), ...ways),
      howItWorks(),
    ),
  );

  // GitHub and Google appear only where they are set up; a gateway that cannot say leaves them out
  // rather than greet the visitor with an error (the e-mail link and the wallet do not need it).
  const answer = await platform;
  if (!ctx.isCurrent()) return;
  if (answer?.sign_in?.github)
    oauth.append(h("a", { class: "btn btn-wide", href: "/auth/github/start", testid: "github-button" }, "Continue with GitHub"));
  if (answer?.sign_in?.google)
    oauth.append(h("a", { class: "btn btn-wide", href: "/auth/google/start", testid: "google-button" }, "Continue with Google"));
  oauth.hidden = !oauth.hasChildNodes();
}

/** The three steps from here to a paid call, and where to look around first. */
function howItWorks(): HTMLElement {
  const step = (title: string, text: string) => h("li", {}, h("strong", {}, title), " ", h("span", { class: "muted" }, text));
  return card(
    "How it works",
    h(
      "ol",
      { class: "steps" },
      step("Add funds.", "USDC, by card or by a transfer to your account's own wallet."),
      step("Create an API key.", "One key for every skill; give it a spending limit if you like."),
      step("Call any skill.", "Each call costs a fraction of a cent, and a failed call costs nothing."),
    ),
    h(
      "p",
      { class: "muted small" },
      h("a", { href: "/marketplace" }, "Browse the Marketplace"),
      " without signing in, or read the ",
      h("a", { href: "/openapi.json", target: "_blank", rel: "noopener" }, "API reference (OpenAPI)"),
      ".",
    ),
  );
}

/**
 * Sign-In With Ethereum. With a browser wallet it is a primary button; without one, a quiet
 * one that says, when pressed, that no wallet is there.
 */
function walletSignIn(ctx: PageContext, hasWallet: boolean): HTMLElement {
  const button = h(
    "button",
    { type: "button", class: `btn btn-wide ${hasWallet ? "btn-primary" : "btn-ghost"}`, testid: "siwe-button" },
    hasWallet ? "Sign in with your browser wallet" : "Sign in with a browser wallet",
  );
  const error = h("p", { class: "field-error", testid: "siwe-error", role: "alert", hidden: true });
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
  return h(
    "div",
    { class: "signin-way" },
    hasWallet ? h("p", { class: "small muted" }, "Sign a message with your wallet (Sign-In With Ethereum): no transaction, no gas.") : null,
    button,
    error,
    switchButton,
  );
}

/** Where the address last asked for a link in this browser is kept, to fill the form on a used link's page. */
const EMAIL_STORAGE_KEY = "sg.sign-in-email";

/** The address this browser last asked a sign-in link for, or "". */
export function rememberedEmail(): string {
  try {
    return localStorage.getItem(EMAIL_STORAGE_KEY) ?? "";
  } catch {
    return ""; // Storage refused (a private window's policy): the form starts empty.
  }
}

function rememberEmail(email: string): void {
  try {
    localStorage.setItem(EMAIL_STORAGE_KEY, email);
  } catch {
    /* Not remembered: the next form starts empty. */
  }
}

const EMAIL_SHAPE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
let emailForms = 0;

/**
 * The e-mail form: asks for a one-time link. Its errors are shown under the field and read
 * out (role=alert); the browser's own validation bubbles are off, so there is one error style.
 */
export function emailForm(
  options: {
    email?: string;
    primary?: boolean;
    platform?: Promise<Platform | undefined>;
    /** The line above the field, and the button's words, where the form does something more specific than signing in. */
    note?: string;
    label?: string;
  } = {},
): HTMLElement {
  const errorId = `email-error-${++emailForms}`;
  const input = h("input", {
    type: "email",
    name: "email",
    autocomplete: "email",
    placeholder: "you@example.com",
    "aria-describedby": errorId,
    testid: "email-input",
  });
  input.value = options.email ?? "";
  const submit = h(
    "button",
    { type: "submit", class: `btn ${options.primary === false ? "" : "btn-primary"}`.trim(), testid: "email-submit" },
    options.label ?? "Email me a sign-in link",
  );
  const error = h("p", { class: "field-error", id: errorId, role: "alert", testid: "email-error", hidden: true });
  const sent = h("p", { class: "success", testid: "email-sent", role: "status", hidden: true });
  const say = (text: string) => {
    error.textContent = text;
    error.hidden = text === "";
    if (text) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  };
  const form = h("form", { class: "inline-form", novalidate: true }, field("E-mail address", input), submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const email = input.value.trim();
    sent.hidden = true;
    if (!EMAIL_SHAPE.test(email)) {
      say(email === "" ? "Enter your e-mail address." : "Enter your e-mail address in full, like you@example.com.");
      return input.focus();
    }
    say("");
    void busy(submit, async () => {
      try {
        const answer = await post<{ message?: string }>("/auth/email/start", { email });
        rememberEmail(email);
        const outbox = (await options.platform)?.email_delivery === "outbox";
        sent.textContent =
          (answer.message ?? "Check your inbox for a sign-in link.") +
          (outbox ? " This gateway sends no mail: the link is in its output (npm start prints it) and in its outbox table." : "");
        sent.hidden = false;
      } catch (e) {
        say(e instanceof ApiFailure ? e.message : "The link could not be sent; try again.");
        input.focus();
      }
    });
  });
  return h(
    "div",
    { class: "signin-way" },
    h("p", { class: "small muted" }, options.note ?? "We e-mail you a one-time link. No password."),
    form,
    error,
    sent,
  );
}
