/**
 * The spend-per-day bar chart: HTML bars over an SVG grid, no chart library, no canvas,
 * nothing from the network. The axes and the tooltip are HTML, so their text keeps its size
 * on a phone (text inside a scaled SVG shrinks with it).
 *
 * A y axis in dollars with round ticks, an x axis of dates (UTC days). Each day is an element
 * with an aria-label ("Nov 21: $0.012, 6 calls"), reached with the keyboard: one Tab stop for
 * the chart, the arrow keys (and Home, End) between days; hovering or focusing a day shows the
 * same words in a tooltip above it, which Escape hides.
 */

import { axisTicks, type DaySpend, layoutBars, xLabelIndices } from "./bars";
import { h } from "./dom";
import { formatBaseUnits, formatCount, formatDay } from "./format";

const SVG = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number>): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  return element;
}

/** What a day says, to a screen reader and in the tooltip: "Nov 21: $0.012, 6 calls". */
export function dayLabel(date: string, units: bigint, calls: number): string {
  return `${formatDay(date)}: ${formatBaseUnits(units)}, ${formatCount(calls, "call")}`;
}

/** Draws one bar per day, oldest on the left, against a y axis whose last tick is at or above the busiest day. */
export function spendChart(days: readonly DaySpend[]): HTMLElement {
  const max = layoutBars(days, 100).reduce((m, bar) => (bar.units > m ? bar.units : m), 0n);
  const ticks = axisTicks(max);
  const top = ticks[ticks.length - 1];
  const bars = layoutBars(days, 100, top);
  const percent = (units: bigint) => Number((units * 10_000n) / top) / 100;

  // The grid: a line per tick, drawn in a 100 × 100 box stretched over the plot.
  const grid = svg("svg", { class: "chart-grid", viewBox: "0 0 100 100", preserveAspectRatio: "none", "aria-hidden": "true" });
  for (const tick of ticks) {
    const y = (100 - percent(tick)).toFixed(2);
    grid.appendChild(svg("line", { x1: 0, y1: y, x2: 100, y2: y, class: tick === 0n ? "chart-axis" : "chart-gridline" }));
  }

  // One number of decimals down the axis ($0.000, $0.005, $0.010), the most any tick needs.
  const texts = ticks.map((tick) => formatBaseUnits(tick));
  const decimals = Math.max(...texts.map((text) => text.split(".")[1]?.length ?? 0));
  const tickText = new Map(
    ticks.map((tick, i) => [tick, texts[i].replace(/\.(\d*)$/, (_m, frac: string) => `.${frac.padEnd(decimals, "0")}`)]),
  );
  const yAxis = h("div", { class: "chart-y", "aria-hidden": "true", testid: "chart-y-axis" });
  for (const tick of ticks) {
    const label = h("span", { class: "chart-tick" }, tickText.get(tick)!);
    label.style.bottom = `${percent(tick)}%`;
    yAxis.appendChild(label);
  }
  // The labels are placed absolutely, so they give the axis no width: it is as wide as the longest (monospace).
  yAxis.style.minWidth = `${Math.max(...[...tickText.values()].map((text) => text.length)) + 1}ch`;

  const tip = h("div", { class: "chart-tip", role: "tooltip", id: "chart-tip", testid: "chart-tip", hidden: true });
  const columns = bars.map((bar, i) => {
    const fill = h("span", { class: "chart-bar" });
    fill.style.height = `${bar.height}%`;
    return h(
      "div",
      {
        class: "chart-col",
        role: "img",
        tabindex: i === bars.length - 1 ? 0 : -1,
        "aria-label": dayLabel(bar.date, bar.units, days[i].calls),
        testid: "chart-day",
        "data-date": bar.date,
      },
      fill,
    );
  });
  const plot = h("div", { class: "chart-plot" }, grid, h("div", { class: "chart-cols" }, ...columns), tip);

  const xAxis = h("div", { class: "chart-x", "aria-hidden": "true", testid: "chart-x-axis" });
  const labelled = xLabelIndices(days.length);
  labelled.forEach((i, n) => {
    // Every other label, counted from the last, gives way on a phone; the ends are aligned inside the plot.
    const minor = (labelled.length - 1 - n) % 2 === 1;
    const label = h("span", { class: `chart-date${minor ? " chart-date-minor" : ""}` }, formatDay(days[i].date));
    if (i === days.length - 1) label.classList.add("chart-date-end");
    else if (i === 0) label.classList.add("chart-date-start");
    else label.style.left = `${((i + 0.5) / days.length) * 100}%`;
    xAxis.appendChild(label);
  });

  // The tooltip is placed in pixels for the plot's width when shown: a resize that changes it (a phone turned) hides it.
  let shownForWidth: number | undefined;
  let listening = false;
  const onResize = () => {
    listening = false;
    if (shownForWidth === undefined) return;
    if (plot.clientWidth !== shownForWidth) hide();
    else listenForResize();
  };
  const listenForResize = () => {
    if (listening) return;
    listening = true;
    window.addEventListener("resize", onResize, { once: true });
  };
  /** Shows day `i`'s words above its bar, kept inside the plot's width. */
  const show = (i: number) => {
    listenForResize();
    shownForWidth = plot.clientWidth;
    tip.textContent = columns[i].getAttribute("aria-label");
    tip.hidden = false;
    const column = columns[i];
    const center = column.offsetLeft + column.offsetWidth / 2;
    const left = Math.min(Math.max(0, center - tip.offsetWidth / 2), Math.max(0, plot.clientWidth - tip.offsetWidth));
    tip.style.left = `${left}px`;
    for (const other of columns) other.classList.toggle("is-active", other === column);
  };
  const hide = () => {
    shownForWidth = undefined;
    tip.hidden = true;
    for (const column of columns) column.classList.remove("is-active");
  };
  /** Moves the chart's one Tab stop to day `i`, and focus with it. */
  const focusDay = (i: number) => {
    columns.forEach((column, j) => column.setAttribute("tabindex", j === i ? "0" : "-1"));
    columns[i].focus();
  };
  columns.forEach((column, i) => {
    column.addEventListener("mouseenter", () => show(i));
    column.addEventListener("focus", () => show(i));
    column.addEventListener("blur", hide);
    column.addEventListener("keydown", (event) => {
      const next = { ArrowLeft: i - 1, ArrowRight: i + 1, Home: 0, End: columns.length - 1 }[event.key];
      if (event.key === "Escape") return hide();
      if (next === undefined) return;
      event.preventDefault();
      focusDay(Math.min(Math.max(0, next), columns.length - 1));
    });
  });
  plot.addEventListener("mouseleave", () => {
    if (!plot.contains(document.activeElement)) hide();
  });

  const totalUnits = bars.reduce((sum, bar) => sum + bar.units, 0n);
  const totalCalls = days.reduce((sum, day) => sum + (day.calls || 0), 0);
  const range = days.length > 0 ? `${formatDay(days[0].date)} to ${formatDay(days[days.length - 1].date, { year: true })}` : "";
  return h(
    "div",
    {
      class: "chart",
      role: "group",
      "aria-roledescription": "bar chart",
      "aria-label": `Spend per day (UTC), ${range}: ${formatBaseUnits(totalUnits)}, ${formatCount(totalCalls, "call")}. The arrow keys move from day to day.`,
      testid: "spend-chart",
    },
    h("span", { class: "chart-axis-title chart-axis-title-y", "aria-hidden": "true" }, "USD per day"),
    yAxis,
    plot,
    h("span", {}),
    xAxis,
    h("span", {}),
    h("span", { class: "chart-axis-title", "aria-hidden": "true" }, "Day (UTC)"),
  );
}
