// chart.js — small horizontal bar charts as inline SVG, no library.
//
// A chart repeats figures that are also written out as text next to it, so
// it is an image with a summary for screen readers. Colours come from CSS
// classes (chart-bar, chart-track…) so both themes style them. Their words
// (labels, summaries) come from the caller, in the reader's language; times
// are written in the portal's language, and the drawing runs left to right
// in a right-to-left page too (a time axis, bars from their start).

import { s } from './dom.js';
import { language } from './i18n.js';

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
      direction: 'ltr',
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

const COLUMN_WIDTH = 720;
const COLUMN_HEIGHT = 120;
const AXIS = 16;

/**
 * Stacked columns over time: `buckets` `[{start, delivered, failed}]`
 * (delivered below, failed above), `marks` `[{at, kind}]` as vertical lines
 * between `since` and `until`, each with its words (`words(mark)`) as a title;
 * the first and last times under the axis. `summary` is the accessible name.
 */
export function timelineChart({ summary, buckets, marks, since, until, words }) {
  const tallest = Math.max(1, ...buckets.map((b) => b.delivered + b.failed));
  const step = COLUMN_WIDTH / Math.max(1, buckets.length);
  const height = (n) => (n / tallest) * COLUMN_HEIGHT;
  const columns = buckets.map((b, i) => {
    const x = (i * step + 0.5).toFixed(1);
    const width = Math.max(1, step - 1).toFixed(1);
    const ok = height(b.delivered);
    const bad = height(b.failed);
    return s(
      'g',
      {},
      ok > 0 && s('rect', { class: 'chart-ok', x, y: (COLUMN_HEIGHT - ok).toFixed(1), width, height: Math.max(1, ok).toFixed(1) }),
      bad > 0 && s('rect', { class: 'chart-bad', x, y: (COLUMN_HEIGHT - ok - bad).toFixed(1), width, height: Math.max(1, bad).toFixed(1) }),
    );
  });
  const from = new Date(since).getTime();
  const span = Math.max(1, new Date(until).getTime() - from);
  const lines = marks.map((m) => {
    const x = (((new Date(m.at).getTime() - from) / span) * COLUMN_WIDTH).toFixed(1);
    return s('line', { class: `chart-mark mark-${m.kind}`, x1: x, x2: x, y1: 0, y2: COLUMN_HEIGHT }, s('title', {}, words(m)));
  });
  const time = (value) => new Date(value).toLocaleString(locale(), { month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit' });
  return s(
    'svg',
    {
      class: 'chart timeline-chart',
      viewBox: `0 0 ${COLUMN_WIDTH} ${COLUMN_HEIGHT + AXIS}`,
      role: 'img',
      'aria-label': summary,
      preserveAspectRatio: 'xMinYMin meet',
      direction: 'ltr',
    },
    s('title', {}, summary),
    s('rect', { class: 'chart-track', x: 0, y: 0, width: COLUMN_WIDTH, height: COLUMN_HEIGHT }),
    columns,
    lines,
    s('text', { class: 'chart-label', x: 0, y: COLUMN_HEIGHT + AXIS - 3 }, time(since)),
    s('text', { class: 'chart-label', x: COLUMN_WIDTH, y: COLUMN_HEIGHT + AXIS - 3, 'text-anchor': 'end' }, time(until)),
  );
}

/** The locale to write times in (as format.js does): the browser's own when it is a variant of the portal's language. */
function locale() {
  const browser = navigator.language ?? '';
  return browser.toLowerCase().split('-')[0] === language() ? browser : language();
}
