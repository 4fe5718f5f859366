/**
 * The dashboard's entry point: loads who is signed in, then routes with the History API.
 * Links inside the app are followed without a page load; links the app has no page for
 * (the OAuth starts under /auth/) are left to the browser.
 */

import { post } from "./api";
import { clearMessages, showError } from "./banner";
import { h, replaceChildren } from "./dom";
import { mayLeave, pageHeld } from "./leave-guard";
import { makeContext, type Page } from "./page";
import { emailLinkPage } from "./pages/email-link";
import { keysPage } from "./pages/keys";
import { marketplacePage } from "./pages/marketplace";
import { oauthResultPage } from "./pages/oauth-result";
import { sellerPage } from "./pages/seller";
import { sellerSkillPage } from "./pages/seller-skill";
import { settingsPage } from "./pages/settings";
import { signinPage } from "./pages/signin";
import { skillPage } from "./pages/skill";
import { usagePage } from "./pages/usage";
import { walletPage } from "./pages/wallet";
import { connectPage } from "./pages/connect";
import { takeReturn } from "./return-after-sign-in";
import { type PageName, resolve } from "./router";
import { forget, me, refreshMe } from "./session";

const PAGES: Record<PageName, Page> = {
  signin: signinPage,
  oauthResult: oauthResultPage,
  emailLink: emailLinkPage,
  wallet: walletPage,
  keys: keysPage,
  marketplace: marketplacePage,
  skill: skillPage,
  usage: usagePage,
  seller: sellerPage,
  sellerSkill: sellerSkillPage,
  settings: settingsPage,
  connect: connectPage,
};

let renderCount = 0;
/** The path of the page rendered last: where Back returns to when the person chooses to stay. */
let shownPath = "";

/** Goes to a path in the app: pushes history (unless replacing) and renders; asks first when the page is held. */
export function navigate(path: string, options: { replace?: boolean } = {}): void {
  if (pageHeld()) {
    void mayLeave().then((leave) => leave && navigate(path, options));
    return;
  }
  if (options.replace) history.replaceState(null, "", path);
  else if (path !== location.pathname + location.search) history.pushState(null, "", path);
  void render();
}

async function render(): Promise<void> {
  const token = ++renderCount;
  const main = document.getElementById("main");
  if (!main) return;
  // Signed in, with a page waiting for that (an MCP client's connect request): back to it, whichever way sign-in went.
  const waiting = me() !== null ? takeReturn() : undefined;
  if (waiting !== undefined && waiting !== location.pathname + location.search) return navigate(waiting, { replace: true });
  const resolution = resolve(location.pathname, me() !== null);
  if (resolution.kind === "redirect") return navigate(resolution.to, { replace: true });
  clearMessages();
  shownPath = location.pathname + location.search;
  markNav(location.pathname);
  const root = h("div", { class: "page" });
  replaceChildren(main, root);
  if (resolution.kind === "not_found") {
    replaceChildren(root, h("h1", {}, "Page not found"), h("p", {}, h("a", { href: "/marketplace" }, "Browse the Marketplace")));
    return;
  }
  const ctx = makeContext(
    root,
    resolution.route.params,
    me(),
    (path) => navigate(path),
    () => token === renderCount,
  );
  try {
    await PAGES[resolution.route.page](ctx);
  } catch (error) {
    ctx.fail(error);
  }
}

/** Marks the nav link of the current page (aria-current), for the highlight and for screen readers. */
function markNav(pathname: string): void {
  for (const link of document.querySelectorAll<HTMLAnchorElement>("nav a")) {
    const href = link.getAttribute("href") ?? "";
    if (pathname === href || pathname.startsWith(`${href}/`)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

/** Follows same-origin links to app pages without reloading. */
function onClick(event: MouseEvent): void {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const link = (event.target as Element | null)?.closest?.("a");
  if (!link || link.target || link.hasAttribute("download") || link.origin !== location.origin) return;
  if (resolve(link.pathname, true).kind === "not_found") return;
  event.preventDefault();
  navigate(link.pathname + link.search);
}

async function signOut(): Promise<void> {
  if (!(await mayLeave())) return;
  try {
    await post("/auth/logout");
  } catch (error) {
    showError(error);
    return;
  }
  forget();
  // A connect request remembered for the next sign-in is this person's, not the next one's at this browser.
  takeReturn();
  navigate("/signin");
}

async function start(): Promise<void> {
  document.addEventListener("click", onClick);
  window.addEventListener("popstate", () => {
    if (!pageHeld()) return void render();
    // Back or Forward already moved the address: put the held page's back, and go only if the person agrees.
    const target = location.pathname + location.search;
    history.pushState(null, "", shownPath);
    navigate(target);
  });
  document.getElementById("nav-signout")?.addEventListener("click", () => void signOut());
  try {
    await refreshMe();
  } catch (error) {
    showError(error);
  }
  await render();
}

void start();
