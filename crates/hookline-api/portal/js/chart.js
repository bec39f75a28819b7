// chart.js — small horizontal bar charts as inline SVG, no library.
//
// A chart repeats figures that are also written out as text next to it, so
// it is an image with a summary for screen readers. Colours come from CSS
// classes (chart-bar, chart-track…) so both themes style them.

import { s } from './dom.js';

const WIDTH = 360;
const ROW = 22;
const LABEL_WIDTH = 90;
const VALUE_WIDTH = 80;
const BAR_WIDTH = WIDTH - LABEL_WIDTH - VALUE_WIDTH;

/**
 * `rows`: `[{ label, value, text, group? }]` — value null draws no bar ("no
 * data"); `max` scales the bars; `summary` is the accessible name. Rows with
 * a new `group` get a little space before them.
 */
export function barChart({ summary, rows, max }) {
  const scale = max > 0 ? max : 1;
  let y = 4;
  let group = rows[0]?.group;
  const items = rows.map((row) => {
    if (row.group !== group) {
      y += 8;
      group = row.group;
    }
    const top = y;
    y += ROW;
    return barRow(row, top, scale);
  });
  return s(
    'svg',
    {
      class: 'chart',
      viewBox: `0 0 ${WIDTH} ${y + 4}`,
      role: 'img',
      'aria-label': summary,
      preserveAspectRatio: 'xMinYMin meet',
    },
    s('title', {}, summary),
    items,
  );
}

function barRow({ label, value, text }, top, scale) {
  const middle = top + ROW / 2;
  const length = value === null || value === undefined ? 0 : Math.max(1, (Math.min(value, scale) / scale) * BAR_WIDTH);
  return s(
    'g',
    {},
    s('text', { class: 'chart-label', x: 0, y: middle, 'dominant-baseline': 'middle' }, label),
    s('rect', { class: 'chart-track', x: LABEL_WIDTH, y: top + 4, width: BAR_WIDTH, height: ROW - 8, rx: 2 }),
    length > 0 && s('rect', { class: 'chart-bar', x: LABEL_WIDTH, y: top + 4, width: length.toFixed(1), height: ROW - 8, rx: 2 }),
    s('text', { class: 'chart-value', x: LABEL_WIDTH + BAR_WIDTH + 6, y: middle, 'dominant-baseline': 'middle' }, text),
  );
}
