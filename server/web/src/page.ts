/**
 * What every page gets, and the bits all pages share. A page renders into its own fresh
 * container: when the person navigates away mid-load, late answers land in a detached
 * element and their errors are dropped (`isCurrent`), instead of writing over the next page.
 */

import { showError, showNotice } from "./banner";
import { h } from "./dom";
import type { Me } from "./types";

export interface PageContext {
  root: HTMLElement;
  params: Record<string, string>;
  me: Me | null;
  navigate(path: string): void;
  /** False once another page has been rendered. */
  isCurrent(): boolean;
  /** Shows an error in the banner, if this page is still the one shown. */
  fail(error: unknown): void;
  notice(text: string): void;
}

export type Page = (ctx: PageContext) => void | Promise<void>;

/** Builds a context for one render; `token` changes on every navigation. */
export function makeContext(
  root: HTMLElement,
  params: Record<string, string>,
  me: Me | null,
  navigate: (path: string) => void,
  isCurrent: () => boolean,
): PageContext {
  return {
    root,
    params,
    me,
    navigate,
    isCurrent,
    fail: (error) => {
      if (isCurrent()) showError(error);
    },
    notice: (text) => {
      if (isCurrent()) showNotice(text);
    },
  };
}

/** A page's title block: the <h1> and an optional line under it. */
export function pageHeader(title: string, lead?: string): HTMLElement {
  return h("div", { class: "page-head" }, h("h1", {}, title), lead ? h("p", { class: "lead" }, lead) : null);
}

/** What a signed-out person sees on a page that needs an account. */
export function signInPrompt(what: string): HTMLElement {
  return h(
    "section",
    { class: "card empty" },
    h("p", {}, `Sign in to ${what}.`),
    h("a", { class: "btn btn-primary", href: "/signin" }, "Sign in"),
  );
}
