import { h } from "./dom";
import { inlineCodeSpans } from "./markdown";

/** A seller's description as DOM nodes: text, and <code> for its `code` spans (./markdown.ts). Never HTML. */
export function inlineMarkdown(text: string): Node[] {
  return inlineCodeSpans(text).map((span) => (span.code ? h("code", {}, span.text) : document.createTextNode(span.text)));
}
