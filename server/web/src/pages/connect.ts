/**
 * Connect an MCP client (/connect?request=...): where a remote MCP client's OAuth authorization (claude.ai, ChatGPT, an
 * MCP SDK; docs/mcp.md) sends the person. Signed out, the page says who is asking and offers to sign in, and comes back
 * here afterwards (./return-after-sign-in.ts). Signed in, it names the client and where it will be sent back, and asks
 * what the connection may do: which skills, how much it may spend per day, month or in total, and until when. Connect
 * makes a calls-only key with exactly those limits (listed on API Keys, where revoking it disconnects the client) and
 * sends the browser back to the client with a code; Refuse sends it back with access_denied.
 */

import { ApiFailure, get, post } from "../api";
import { busy, h, muted } from "../dom";
import { clearErrors, fieldError, formError, formField, validatedForm } from "../forms";
import { formatDateTime } from "../format";
import { expiryOfDay, parseSkillList } from "../key-fields";
import { type PageContext, pageHeader } from "../page";
import { rememberReturn } from "../return-after-sign-in";

interface ConnectRequest {
  client_id: string;
  client_name: string;
  client_uri: string | null;
  redirect_uri: string;
  expires_at: string;
}

/** What the page proposes: a small daily budget, and a connection that lapses in a month. */
const DEFAULT_LIMIT_USD = "5.00";
const DEFAULT_DAYS = 30;

export async function connectPage(ctx: PageContext): Promise<void> {
  const requestId = new URLSearchParams(location.search).get("request") ?? "";
  ctx.root.append(pageHeader("Connect an MCP client", "An application asks to call skills with your balance, within limits you set here."));
  if (!ctx.me) {
    rememberReturn(location.pathname + location.search);
    ctx.root.append(
      h(
        "section",
        { class: "card empty", testid: "connect-sign-in" },
        h("p", {}, "Sign in to decide. You come back to this page afterwards."),
        h("a", { class: "btn btn-primary", href: "/signin" }, "Sign in"),
      ),
    );
    return;
  }
  let request: ConnectRequest;
  try {
    request = await get<ConnectRequest>(`/v1/oauth/requests/${encodeURIComponent(requestId)}`);
  } catch (error) {
    if (!ctx.isCurrent()) return;
    if (error instanceof ApiFailure && error.status === 404) {
      ctx.root.append(h("section", { class: "card empty", testid: "connect-gone" }, h("p", {}, error.message)));
      return;
    }
    return ctx.fail(error);
  }
  if (!ctx.isCurrent()) return;
  ctx.root.append(consentForm(ctx, requestId, request));
}

/**
 * Where the client will be sent back, the one thing about it the gateway checked (its registration named it): an
 * https or http origin, or an app's own scheme (com.example.app:), whose URL has no origin to show.
 */
export function destinationOf(redirectUri: string): string {
  const url = new URL(redirectUri);
  return url.protocol === "https:" || url.protocol === "http:" ? url.origin : `the app ${url.protocol}`;
}

/** The client's self-declared address, shown only when it is the host the browser will be sent back to. */
export function vouchedUri(clientUri: string | null, redirectUri: string): string | null {
  if (clientUri === null) return null;
  try {
    return new URL(clientUri).hostname === new URL(redirectUri).hostname ? clientUri : null;
  } catch {
    return null;
  }
}

function consentForm(ctx: PageContext, requestId: string, request: ConnectRequest): HTMLElement {
  const destination = destinationOf(request.redirect_uri);
  const name = request.client_name === "" ? "An MCP client" : request.client_name;
  const site = vouchedUri(request.client_uri, request.redirect_uri);
  const skills = h("input", { type: "text", class: "input", placeholder: "every skill", testid: "connect-skills" });
  const limit = h("input", { type: "text", class: "input", inputmode: "decimal", value: DEFAULT_LIMIT_USD, testid: "connect-limit" });
  const period = h(
    "select",
    { class: "input", testid: "connect-period" },
    h("option", { value: "day" }, "per day"),
    h("option", { value: "month" }, "per month"),
    h("option", { value: "total" }, "in total"),
  );
  const expiry = h("input", {
    type: "date",
    class: "input",
    value: new Date(Date.now() + DEFAULT_DAYS * 86_400_000).toISOString().slice(0, 10),
    testid: "connect-expiry",
  });
  const connect = h("button", { type: "submit", class: "btn btn-primary", testid: "connect-approve" }, "Connect");
  const refuse = h("button", { type: "button", class: "btn", testid: "connect-deny" }, "Refuse");

  const form = validatedForm(
    { class: "card form", testid: "connect-form" },
    h(
      "p",
      { testid: "connect-client" },
      "An application at ",
      h("strong", { testid: "connect-destination" }, destination),
      ` asks to call skills through your account. It calls itself "${name}"`,
      site ? ` (${site})` : "",
      ": a name any application may choose. Connect only if you started this from that application.",
    ),
    formField("Skills it may call", skills, "Slugs separated by commas; empty for every skill."),
    h("div", { class: "row" }, formField("Spending limit (USD)", limit, "Empty for no limit."), formField("Per", period)),
    formField("Connected until", expiry, "The end of this day (UTC); empty for no end."),
    muted(
      `Connecting makes a key that can only call skills, with these limits, listed on API Keys as "${name} (MCP)": revoke it there to disconnect. This request waits until ${formatDateTime(request.expires_at)}.`,
    ),
    h("div", { class: "actions" }, connect, refuse),
  );

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearErrors(form);
    const amount = limit.value.trim();
    const expiresAt = expiryOfDay(expiry.value);
    if (expiresAt === undefined) return fieldError(expiry, "Pick a day, or leave it empty.");
    const body = {
      allowed_skills: parseSkillList(skills.value),
      spend_limit_usd: amount === "" ? null : amount,
      ...(amount === "" ? {} : { spend_limit_period: period.value }),
      expires_at: expiresAt,
    };
    void busy(connect, async () => {
      try {
        const answer = await post<{ redirect_to: string }>(`/v1/oauth/requests/${encodeURIComponent(requestId)}/approve`, body);
        location.assign(answer.redirect_to);
      } catch (error) {
        formError(form, error, [
          [/allowed_skills|skill/i, skills],
          [/limit|spend/i, limit],
          [/period/i, period],
          [/expires/i, expiry],
        ]);
      }
    });
  });
  refuse.addEventListener("click", () => {
    void busy(refuse, async () => {
      try {
        const answer = await post<{ redirect_to: string }>(`/v1/oauth/requests/${encodeURIComponent(requestId)}/deny`);
        location.assign(answer.redirect_to);
      } catch (error) {
        ctx.fail(error);
      }
    });
  });
  return form;
}
