/**
 * Keeps a person on a page that holds something they would lose by leaving (a secret shown once): while it is
 * held, leaving (a link, Back, a reload) asks first. The router asks `mayLeave()` before it renders another page;
 * the browser's own question covers reloads and closing the tab.
 */

import { confirmDialog } from "./dialog";

let held: string | null = null;

/** Holds the page with `question` (asked when the person tries to leave); returns the release. */
export function holdPage(question: string): () => void {
  held = question;
  return () => {
    if (held === question) held = null;
  };
}

/** Whether something holds the page now. */
export function pageHeld(): boolean {
  return held !== null;
}

/** Asks whether to leave, if something holds the page; true when leaving is fine (and the hold is dropped). */
export async function mayLeave(): Promise<boolean> {
  if (held === null) return true;
  const leave = await confirmDialog(held, "Leave anyway", { danger: true });
  if (leave) held = null;
  return leave;
}

window.addEventListener("beforeunload", (event) => {
  if (held !== null) event.preventDefault();
});
