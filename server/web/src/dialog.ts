/**
 * A confirmation in a <dialog>, not window.confirm: it matches the page, keyboard and
 * screen readers get a real modal, and browser tests can click its buttons.
 */

import { h } from "./dom";

/** Asks a yes/no question; resolves true only when the person presses the OK button. */
export function confirmDialog(message: string, okLabel = "Confirm", options: { danger?: boolean } = {}): Promise<boolean> {
  return new Promise((resolve) => {
    const ok = h("button", { type: "button", class: options.danger ? "btn btn-danger" : "btn btn-primary", testid: "confirm-ok" }, okLabel);
    const cancel = h("button", { type: "button", class: "btn btn-ghost", testid: "confirm-cancel" }, "Cancel");
    const dialog = h("dialog", { class: "dialog", "aria-label": message }, h("p", {}, message), h("div", { class: "actions" }, cancel, ok));
    let answer = false;
    ok.addEventListener("click", () => {
      answer = true;
      dialog.close();
    });
    cancel.addEventListener("click", () => dialog.close());
    // Escape closes the dialog too: that is a "no".
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(answer);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    cancel.focus();
  });
}
