/**
 * Settings: the account's e-mail address, every way it signs in (e-mail, GitHub, Google, browser
 * wallets), its wallets, and the name its skills are sold under. All of it from GET /v1/me; the
 * display name is saved with PATCH /v1/account {display_name}, on gateways that have that route
 * (the page asks first, and says so where it does not).
 */

import { ApiFailure, patch } from "../api";
import { busy, card, field, h, monoValue, muted } from "../dom";
import { formatDateTime } from "../format";
import { type PageContext, pageHeader, signInPrompt } from "../page";
import { refreshMe } from "../session";
import type { Me } from "../types";
import { emailForm } from "./signin";

const PROVIDER_NAMES: Record<string, string> = {
  email: "E-mail",
  github: "GitHub",
  google: "Google",
  siwe: "Browser wallet (Sign-In With Ethereum)",
};

/** The longest display name the form lets through; the gateway checks its own rule and says so. */
const DISPLAY_NAME_MAX = 64;

export async function settingsPage(ctx: PageContext): Promise<void> {
  ctx.root.append(pageHeader("Settings", "Your account, the ways you sign in, and the name your skills are sold under."));
  if (!ctx.me) return void ctx.root.append(signInPrompt("see your settings"));
  const me = ctx.me;
  const sellerName = h("div", {}, muted("Loading…"));
  ctx.root.append(accountCard(me), signInsCard(me), walletsCard(me), card("Seller profile", sellerName));
  await showDisplayName(ctx, me, sellerName);
}

function emailOf(me: Me): string | undefined {
  return me.identities.find((identity) => identity.provider === "email")?.subject;
}

/** A label and its value, as a row of a definition list. */
function fact(label: string, value: Node | string, testid?: string): HTMLElement[] {
  return [h("dt", {}, label), h("dd", testid ? { testid } : {}, value)];
}

function accountCard(me: Me): HTMLElement {
  const email = emailOf(me);
  return card(
    "Account",
    h(
      "dl",
      { class: "facts" },
      ...fact("E-mail", email ?? "No e-mail address yet: add one under Sign-in methods.", "settings-email"),
      ...fact("Name", me.name),
      ...fact("Account ID", monoValue(me.account_id, {}, { head: 8, tail: 4 })),
    ),
  );
}

/** What an identity's subject means to its owner: an address, or the provider's account number. */
function identityText(identity: Me["identities"][number]): Node | string {
  if (identity.provider === "siwe") return monoValue(identity.subject, {}, { head: 8, tail: 6 });
  if (identity.provider === "github") return `GitHub account #${identity.subject}`;
  if (identity.provider === "google") return `Google account ${identity.subject}`;
  return identity.subject;
}

function signInsCard(me: Me): HTMLElement {
  const list = h(
    "ul",
    { class: "linked-list", testid: "settings-signins" },
    ...me.identities.map((identity) =>
      h(
        "li",
        { testid: "settings-signin", "data-provider": identity.provider },
        h("strong", {}, PROVIDER_NAMES[identity.provider] ?? identity.provider),
        h("span", {}, identityText(identity)),
        h("span", { class: "muted small" }, `linked ${formatDateTime(identity.linked_at)}`),
      ),
    ),
  );
  return card(
    "Sign-in methods",
    list,
    h("h3", {}, emailOf(me) ? "Add another e-mail address" : "Add an e-mail address"),
    emailForm({
      primary: false,
      note: "We e-mail it a one-time link; opening the link in this browser adds the address to this account.",
      label: "Email me a link to add it",
    }),
    h(
      "p",
      { class: "muted small" },
      "GitHub, Google or a browser wallet: ",
      h("a", { href: "/signin" }, "sign in with it"),
      " while signed in here, and it is added to this account.",
    ),
  );
}

function walletsCard(me: Me): HTMLElement {
  const embedded = me.wallet
    ? [
        ...fact("Embedded wallet", monoValue(me.wallet.address, { testid: "settings-wallet" }, { head: 10, tail: 8 })),
        ...fact(
          "Controlled by",
          me.wallet.owner === "siwe" && me.wallet.owner_address
            ? monoValue(me.wallet.owner_address, {}, { head: 10, tail: 8 })
            : "the gateway, for you (no key to keep)",
        ),
      ]
    : fact("Embedded wallet", "None yet: it is made when the gateway has a chain.");
  const linked = me.addresses.length
    ? me.addresses.map((address) => monoValue(address, { testid: "settings-address" }, { head: 10, tail: 8 }))
    : ["None"];
  return card(
    "Wallets",
    h("dl", { class: "facts" }, ...embedded, ...fact("Escrow addresses", h("span", { class: "stack-tight" }, ...linked))),
    h(
      "p",
      { class: "muted small" },
      "Escrow deposits to these addresses are credited to this account, and earnings are claimed to the first.",
    ),
  );
}

/**
 * Whether this gateway saves display names (PATCH /v1/account). GET /v1/me names the field when
 * it does. Otherwise one PATCH is sent WITHOUT the CSRF token: it can change nothing, since a
 * route that exists refuses it (403) before reading it, and one that does not answers 404.
 */
async function displayNameSupported(me: Me): Promise<boolean> {
  if ("display_name" in me) return true;
  try {
    const answer = await fetch("/v1/account", {
      method: "PATCH",
      headers: { accept: "application/json", "content-type": "application/json" },
      body: "{}",
      credentials: "same-origin",
    });
    return answer.status !== 404;
  } catch {
    return false;
  }
}

async function showDisplayName(ctx: PageContext, me: Me, box: HTMLElement): Promise<void> {
  const supported = await displayNameSupported(me);
  if (!ctx.isCurrent()) return;
  if (!supported) {
    box.replaceChildren(
      muted(`Your skills are listed as sold by "${me.name}". This gateway does not let you choose a display name yet.`, {
        testid: "display-name-unavailable",
      }),
    );
    return;
  }
  box.replaceChildren(displayNameForm(me));
}

function displayNameForm(me: Me): HTMLElement {
  const errorId = "display-name-error";
  const input = h("input", {
    type: "text",
    maxlength: DISPLAY_NAME_MAX,
    autocomplete: "organization",
    placeholder: me.name,
    "aria-describedby": `${errorId} display-name-hint`,
    testid: "display-name",
  });
  input.value = me.display_name ?? "";
  const save = h("button", { type: "submit", class: "btn btn-primary", testid: "display-name-save" }, "Save");
  const error = h("p", { class: "field-error", id: errorId, role: "alert", hidden: true });
  const saved = h("p", { class: "success", role: "status", testid: "display-name-saved" });
  const form = h("form", { class: "inline-form", novalidate: true }, field("Display name", input), save);
  const say = (text: string) => {
    error.textContent = text;
    error.hidden = text === "";
    if (text) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    saved.textContent = "";
    const name = input.value.trim();
    say("");
    void busy(save, async () => {
      try {
        await patch("/v1/account", { display_name: name === "" ? null : name });
        const fresh = await refreshMe();
        saved.textContent =
          name === ""
            ? `Cleared: your skills show "${fresh?.name ?? me.name}" as their seller.`
            : `Saved: your skills show "${name}" as their seller.`;
      } catch (e) {
        say(e instanceof ApiFailure ? e.message : "The name could not be saved; try again.");
        input.focus();
      }
    });
  });
  return h(
    "div",
    {},
    h(
      "p",
      { class: "muted small", id: "display-name-hint" },
      "The name the Marketplace shows as the seller of your skills, instead of your e-mail address or wallet.",
    ),
    form,
    error,
    saved,
  );
}
