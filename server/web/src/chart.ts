/**
 * The spend-per-day bar chart, as inline SVG: no chart library, no canvas, nothing from the
 * network. Each bar carries a <title> (a native tooltip, read by screen readers).
 */

import { layoutBars, type DaySpend } from "./bars";
import { h } from "./dom";
import { formatBaseUnits } from "./format";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 600;
const HEIGHT = 160;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number>): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  return element;
}

/**
 * Draws one bar per day, oldest on the left, scaled to the busiest day. The first and last
 * dates label the axis as HTML under the SVG: text inside a scaled SVG shrinks on a phone.
 */
export function spendChart(days: readonly DaySpend[]): HTMLElement {
  const root = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT + 1}`, class: "chart", role: "img", "data-testid": "spend-chart" });
  const total = days.reduce((sum, day) => sum + (day.calls || 0), 0);
  const title = svg("title", {});
  title.textContent = `Spend per day over ${days.length} days (${total} calls)`;
  root.appendChild(title);
  root.appendChild(svg("line", { x1: 0, y1: HEIGHT + 0.5, x2: WIDTH, y2: HEIGHT + 0.5, class: "chart-axis" }));

  const bars = layoutBars(days, HEIGHT - 4);
  const slot = WIDTH / Math.max(1, bars.length);
  bars.forEach((bar, i) => {
    const rect = svg("rect", {
      x: (i * slot + slot * 0.15).toFixed(2),
      y: (HEIGHT - bar.height).toFixed(2),
      width: (slot * 0.7).toFixed(2),
      height: bar.height.toFixed(2),
      rx: 2,
      class: "chart-bar",
    });
    const tip = svg("title", {});
    tip.textContent = `${bar.date}: ${formatBaseUnits(bar.units)} (${days[i].calls} calls)`;
    rect.appendChild(tip);
    root.appendChild(rect);
  });
  const labels =
    days.length > 0
      ? h("div", { class: "chart-labels", "aria-hidden": "true" }, h("span", {}, days[0].date), h("span", {}, days[days.length - 1].date))
      : null;
  return h("div", { class: "chart-wrap" }, root, labels);
}
