/**
 * The page's two message areas: the error banner (role=alert, read out by screen readers)
 * and the success notice. One of each for the whole app, so a person always looks in the
 * same place, and the browser tests find them by data-testid.
 */

import { describeError } from "./api";
import { walletLinkFor } from "./forms";

const byTestId = (id: string) => document.querySelector<HTMLElement>(`[data-testid="${id}"]`);

function show(id: string, text: string): void {
  const element = byTestId(id);
  if (!element) return;
  element.textContent = text;
  element.hidden = text === "";
}

/** Shows an error in plain words (an ApiFailure's message is the API's own); a 402 links to the Wallet. */
export function showError(error: unknown): void {
  show("notice", "");
  show("error-banner", typeof error === "string" ? error : describeError(error));
  const link = walletLinkFor(error);
  if (link) byTestId("error-banner")?.append(" ", link);
}

/** Shows a success notice; clears any error. */
export function showNotice(text: string): void {
  show("error-banner", "");
  show("notice", text);
}

/** Clears both, on navigation. */
export function clearMessages(): void {
  show("error-banner", "");
  show("notice", "");
}
