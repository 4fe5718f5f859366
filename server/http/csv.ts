/**
 * CSV for files people open in a spreadsheet (RFC 4180: comma-separated, CRLF line ends, a field
 * quoted when it holds a comma, a quote or a line break, its quotes doubled).
 */

/** What a CSV cell may hold: text, a number we computed, or nothing (an empty cell). */
export type CsvCell = string | number | null;

/**
 * One cell. Text that a spreadsheet would run as a formula (starting with =, +, -, @ or any control character:
 * OWASP's "CSV injection") is prefixed with a single quote, so that it shows as the text it is. Numbers are
 * written as they are: they come from the gateway, never from a stranger.
 */
export function csvCell(value: CsvCell): string {
  if (value === null) return "";
  if (typeof value === "number") return String(value);
  const text = /^[=+\-@\p{Cc}]/u.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** One line of cells, with its CRLF. */
export function csvLine(cells: readonly CsvCell[]): string {
  return `${cells.map(csvCell).join(",")}\r\n`;
}
