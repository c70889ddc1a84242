// @ts-check
/**
 * The usage chart: one series (requests, tokens or spend) per bucket (hour or day), the account's total and its busiest keys, drawn by uPlot (loaded
 * by the page as a classic script from the server itself, vendor/uPlot.iife.min.js, so the CSP's script-src 'self'
 * holds). uPlot sets sizes through the CSSOM, which style-src 'self' allows, and draws on a canvas: key names reach it
 * as text only.
 */

/** @typedef {import('uplot')} UPlot */
/** @typedef {import('uplot').Options} UPlotOptions */

/** At most this many keys get a line of their own; the total covers all of them. */
const MAX_KEY_SERIES = 5;
const COLOURS = ['#2f5bd3', '#1e6b34', '#b42318', '#7a4d00', '#5b2a86'];
const HEIGHT = 220;

/** uPlot's constructor, from the global its IIFE build defines; a page without it fails with a plain message. */
function uPlotConstructor() {
  const constructor = /** @type {{ uPlot?: typeof import('uplot') }} */ (/** @type {unknown} */ (globalThis)).uPlot;
  if (typeof constructor !== 'function') throw new Error('The chart library did not load (vendor/uPlot.iife.min.js).');
  return constructor;
}

/**
 * @typedef {object} UsageSeries
 * @property {string} label
 * @property {number[]} values  one per bucket
 * @property {string[]} [shownValues]  what the legend shows per bucket instead of the number (exact money text)
 */

/**
 * The legend's text for a bucket: the series' own text where it has one.
 * @param {UsageSeries} series
 */
function legendValue(series) {
  const shown = series.shownValues;
  if (!shown) return {};
  return {
    /** @type {(u: UPlot, value: number | null, seriesIndex: number, bucket: number | null) => string} */
    value: (_u, value, _seriesIndex, bucket) => (bucket === null ? (value === null ? '' : String(value)) : (shown[bucket] ?? '')),
  };
}

/**
 * Draws into `container`, replacing any earlier chart; follows the container's width.
 * @param {HTMLElement} container
 */
export function usageChart(container) {
  /** @type {UPlot | null} */
  let chart = null;
  const width = () => Math.max(260, Math.floor(container.clientWidth));
  const observer = new ResizeObserver(() => chart?.setSize({ width: width(), height: HEIGHT }));
  observer.observe(container);

  /**
   * @param {string[]} bucketStarts  ISO times, oldest first
   * @param {'hour' | 'day'} granularity
   * @param {UsageSeries} total
   * @param {UsageSeries[]} keys  busiest first
   * @param {string} what  what the values count, for the axis: "Requests", "Tokens", "Spend (USD)"
   */
  function draw(bucketStarts, granularity, total, keys, what) {
    chart?.destroy();
    const shown = keys.slice(0, MAX_KEY_SERIES);
    const xs = bucketStarts.map((iso) => Date.parse(iso) / 1000);
    /** @type {UPlotOptions} */
    const options = {
      width: width(),
      height: HEIGHT,
      tzDate: (ts) => {
        // Buckets are UTC hours and days: show them in UTC, as the rest of the page does.
        const date = new Date(ts * 1000);
        return new Date(date.getTime() + date.getTimezoneOffset() * 60_000);
      },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max : 1] } },
      axes: [{}, { label: `${what} per ${granularity}`, size: 60 }],
      series: [
        {},
        { label: total.label, stroke: '#1d2330', width: 2, ...legendValue(total) },
        ...shown.map((series, i) => ({ label: series.label, stroke: COLOURS[i % COLOURS.length], width: 1.5, ...legendValue(series) })),
      ],
      legend: { show: true },
    };
    const UPlotConstructor = uPlotConstructor();
    chart = new UPlotConstructor(options, [xs, total.values, ...shown.map((series) => series.values)], container);
  }

  function clear() {
    chart?.destroy();
    chart = null;
  }

  return { draw, clear };
}
