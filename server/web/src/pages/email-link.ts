/**
 * Where a mailed sign-in link lands (/auth/email/callback?token=…). Opening the link signs
 * no one in: the page asks the gateway what the link would do (POST /auth/email/preview),
 * says so ("Sign in as ada@example.com"), and only its button uses the link up (POST
 * /auth/email/verify). A mail scanner that fetches the link, or even runs this page, does not
 * press the button. A browser signed in to another account is not switched unless the
 * person chooses to, here.
 */

import { ApiFailure, post } from "../api";
import { busy, card, h, muted } from "../dom";
import { type PageContext, pageHeader } from "../page";
import { refreshMe } from "../session";
import { emailForm, rememberedEmail } from "./signin";

/** The answer of POST /auth/email/preview. */
interface LinkPreview {
  email: string;
  expires_at: string;
  signed_in: boolean;
  action: "sign_in" | "sign_up" | "link" | null;
  refusal: "session_exists" | "identity_taken" | null;
  switch_action: "sign_in" | "sign_up" | null;
}

const TITLE = "E-mail sign-in";

export async function emailLinkPage(ctx: PageContext): Promise<void> {
  const token = new URLSearchParams(location.search).get("token") ?? "";
  ctx.root.append(pageHeader(TITLE));
  const body = h("div", { class: "stack" }, muted("Checking your link…"));
  ctx.root.append(body);
  await show(ctx, body, token);
}

/** Asks what the link does and shows it, or the way to a new link when it cannot be used. */
async function show(ctx: PageContext, body: HTMLElement, token: string): Promise<void> {
  let preview: LinkPreview;
  try {
    preview = await post<LinkPreview>("/auth/email/preview", { token });
  } catch (error) {
    if (!ctx.isCurrent()) return;
    if (error instanceof ApiFailure && error.code === "sign_in_failed") return void body.replaceChildren(unusable(ctx, error.message));
    body.replaceChildren(muted("This link could not be checked right now."));
    return ctx.fail(error);
  }
  if (!ctx.isCurrent()) return;
  body.replaceChildren(preview.refusal === null ? confirm(ctx, body, token, preview) : conflict(ctx, body, token, preview));
}

/** The card with the one button that signs in. */
function confirm(ctx: PageContext, body: HTMLElement, token: string, preview: LinkPreview): HTMLElement {
  const { text, label } =
    preview.action === "link"
      ? {
          text: `This link adds ${preview.email} to the account you are signed in to, as another way to sign in.`,
          label: `Add ${preview.email}`,
        }
      : preview.action === "sign_up"
        ? { text: `This link creates your account for ${preview.email}, with its own USDC wallet.`, label: `Sign up as ${preview.email}` }
        : { text: `This link signs you in as ${preview.email}.`, label: `Sign in as ${preview.email}` };
  const button = h("button", { type: "button", class: "btn btn-primary", testid: "email-link-confirm" }, label);
  button.addEventListener("click", () => void busy(button, () => use(ctx, body, token, false)));
  return card(
    null,
    h("p", {}, text),
    h("p", { class: "muted small" }, "The link works once; pressing the button uses it."),
    h("div", { class: "choice" }, button),
  );
}

/** Signed in to another account: the person chooses between switching and staying. */
function conflict(ctx: PageContext, body: HTMLElement, token: string, preview: LinkPreview): HTMLElement {
  const current = ctx.me ? ` (${ctx.me.name})` : "";
  const why =
    preview.refusal === "identity_taken"
      ? `${preview.email} already signs in to another account, so it cannot be added to the one you are signed in to${current}.`
      : `You are signed in to another account${current}. This link ${preview.switch_action === "sign_up" ? "creates a new account for" : "signs in as"} ${preview.email}.`;
  const label = `Switch to ${preview.email}`;
  const button = h("button", { type: "button", class: "btn btn-primary", testid: "email-link-switch" }, label);
  button.addEventListener("click", () => void busy(button, () => use(ctx, body, token, true)));
  const stay = h("a", { class: "btn", href: "/wallet", testid: "email-link-stay" }, "Stay signed in");
  return card(
    "You are already signed in",
    h("p", {}, why),
    h(
      "p",
      { class: "muted small" },
      "Switching signs this browser out of the current account. Staying leaves everything as it is; the link stays unused until it expires.",
    ),
    h("div", { class: "choice" }, button, stay),
  );
}

/** Uses the link (POST /auth/email/verify); a refusal that changed since the preview is shown again. */
async function use(ctx: PageContext, body: HTMLElement, token: string, switchAccount: boolean): Promise<void> {
  try {
    await post("/auth/email/verify", switchAccount ? { token, switch_account: true } : { token });
  } catch (error) {
    if (error instanceof ApiFailure && (error.code === "session_exists" || error.code === "identity_taken")) return show(ctx, body, token);
    if (error instanceof ApiFailure && error.code === "sign_in_failed") return void body.replaceChildren(unusable(ctx, error.message));
    return ctx.fail(error);
  }
  // The link is spent: keep it out of the address bar and the history.
  history.replaceState(null, "", "/wallet");
  await refreshMe();
  ctx.navigate("/wallet");
}

/**
 * A used, expired or mistyped link: what happened (the gateway's sentence says which), and the
 * ways on: a new link (the form filled with the address this browser last asked one for) or
 * the sign-in page; a browser that is signed in already is told so, with the way back in.
 */
function unusable(ctx: PageContext, why: string): HTMLElement {
  const email = rememberedEmail() || emailOf(ctx);
  return h(
    "div",
    { class: "stack", testid: "email-link-unusable" },
    card(
      "This link cannot be used",
      h("p", { testid: "email-link-why" }, why),
      ctx.me
        ? h(
            "p",
            { testid: "email-link-signed-in" },
            `You are signed in already, as ${ctx.me.name}. `,
            h("a", { href: "/wallet" }, "Go to your wallet"),
            ".",
          )
        : null,
      h("h3", {}, "Ask for a new link"),
      emailForm({ email }),
      h(
        "p",
        { class: "muted small" },
        "Or ",
        h("a", { href: "/signin", testid: "email-link-signin" }, "go to the sign-in page"),
        " to sign in another way.",
      ),
    ),
  );
}

/** The signed-in account's e-mail address, if it has one. */
function emailOf(ctx: PageContext): string {
  return ctx.me?.identities.find((identity) => identity.provider === "email")?.subject ?? "";
}
