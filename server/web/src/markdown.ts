/**
 * The one piece of Markdown a skill's description gets: inline code (`ms`, ``a `b` c``), as
 * CommonMark reads it. The description is a stranger's text, so it is never parsed as HTML:
 * `inlineCodeSpans` splits it into plain and code runs, and ./rich-text.ts makes each run a
 * text node or a <code> element holding a text node. Pure: no DOM, so the unit tests run it.
 */

/** A run of a description: plain text, or the content of a code span. */
export interface Span {
  code: boolean;
  text: string;
}

/**
 * Splits text into plain runs and code spans. A code span opens with a run of N backticks and closes
 * at the next run of exactly N; one space is stripped from each side of its content when both sides
 * have one (so `` `a` `` can show backticks), and line breaks inside it read as spaces. A backtick
 * run with no closing run is plain text.
 */
export function inlineCodeSpans(text: string): Span[] {
  const spans: Span[] = [];
  let plain = "";
  let i = 0;
  while (i < text.length) {
    if (text[i] !== "`") {
      plain += text[i++];
      continue;
    }
    const open = runLength(text, i);
    const close = findRun(text, i + open, open);
    if (close < 0) {
      plain += text.slice(i, i + open);
      i += open;
      continue;
    }
    let code = text.slice(i + open, close).replace(/\r?\n/g, " ");
    if (code.startsWith(" ") && code.endsWith(" ") && code.trim() !== "") code = code.slice(1, -1);
    if (plain !== "") spans.push({ code: false, text: plain });
    spans.push({ code: true, text: code });
    plain = "";
    i = close + open;
  }
  if (plain !== "") spans.push({ code: false, text: plain });
  return spans;
}

/** How many backticks start at `at`. */
function runLength(text: string, at: number): number {
  let end = at;
  while (text[end] === "`") end++;
  return end - at;
}

/** Where the next run of exactly `length` backticks starts, from `from`; -1 for none. */
function findRun(text: string, from: number, length: number): number {
  for (let i = from; i < text.length;) {
    if (text[i] !== "`") {
      i++;
      continue;
    }
    const run = runLength(text, i);
    if (run === length) return i;
    i += run;
  }
  return -1;
}
