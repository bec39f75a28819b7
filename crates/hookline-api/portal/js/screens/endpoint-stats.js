// screens/endpoint-stats.js — an endpoint's figures from GET …/stats: the
// chosen window's attempts, success rate and latency percentiles, charts of
// all three windows side by side, and its deliveries by state.

import { barChart } from '../chart.js';
import { append, h, replace } from '../dom.js';
import { integer, percent } from '../format.js';
import { facts, showProblem, problemSlot } from '../ui.js';
import { DEAD_REASONS, DELIVERY_STATES } from '../words.js';

const WINDOWS = [
  ['hour', 'Last hour', '1 h'],
  ['day', 'Last 24 hours', '24 h'],
  ['week', 'Last 7 days', '7 d'],
];
const PERCENTILES = ['p50', 'p95', 'p99'];

/** `stats`: the stats answer, or the Error that stopped it loading. */
export function statsSection(stats) {
  const section = h(
    'section',
    { class: 'section', 'aria-labelledby': 'stats-heading' },
    h('h2', { id: 'stats-heading' }, 'Performance'),
  );
  if (stats instanceof Error) {
    const problem = problemSlot();
    section.append(problem);
    showProblem(problem, stats);
    return section;
  }

  const chooser = h(
    'select',
    { id: 'stats-window' },
    WINDOWS.map(([key, label]) => h('option', { value: key, selected: key === 'day' }, label)),
  );
  const figures = h('div', { 'aria-live': 'polite' });
  const show = () => replace(figures, windowFacts(stats.windows?.[chooser.value], stats.sample_cap));
  chooser.addEventListener('change', show);
  show();

  return append(section, [
    h('div', { class: 'field inline' }, h('label', { for: 'stats-window' }, 'Window'), chooser),
    figures,
    h('div', { class: 'charts' }, successChart(stats.windows ?? {}), latencyChart(stats.windows ?? {})),
    h('h3', {}, 'Deliveries by state'),
    deliveryCounts(stats),
  ]);
}

function windowFacts(w, sampleCap) {
  if (!w) return h('p', { class: 'empty' }, 'No figures for this window.');
  const latency = w.latency_ms ?? {};
  return [
    facts([
      ['Attempts', integer(w.attempts)],
      ['Delivered', integer(w.delivered)],
      ['Success rate', w.attempts ? percent(w.success_rate) : '—'],
      ['Latency p50', ms(latency.p50)],
      ['Latency p95', ms(latency.p95)],
      ['Latency p99', ms(latency.p99)],
    ]),
    w.sampled && h('p', { class: 'hint' }, `Figures over the latest ${integer(sampleCap)} attempts of this window.`),
  ];
}

function ms(value) {
  return value === null || value === undefined ? '—' : `${integer(value)} ms`;
}

function successChart(windows) {
  const rows = WINDOWS.map(([key, label]) => {
    const w = windows[key];
    const rate = w?.attempts ? w.success_rate : null;
    return { label, value: rate, text: rate === null ? 'no data' : percent(rate) };
  });
  return h(
    'figure',
    { class: 'chart-figure' },
    barChart({ summary: `Success rate: ${rows.map((r) => `${r.label} ${r.text}`).join(', ')}`, rows, max: 1 }),
    h('figcaption', {}, 'Success rate (share of attempts answered 2xx)'),
  );
}

function latencyChart(windows) {
  const rows = WINDOWS.flatMap(([key, , short]) =>
    PERCENTILES.map((p) => {
      const value = windows[key]?.latency_ms?.[p] ?? null;
      return { group: key, label: `${short} ${p}`, value, text: ms(value) };
    }),
  );
  const max = Math.max(0, ...rows.map((r) => r.value ?? 0));
  return h(
    'figure',
    { class: 'chart-figure' },
    barChart({ summary: `Latency: ${rows.map((r) => `${r.label} ${r.text}`).join(', ')}`, rows, max }),
    h('figcaption', {}, 'Latency percentiles (milliseconds)'),
  );
}

function deliveryCounts(stats) {
  const byState = stats.deliveries ?? {};
  const byReason = stats.dlq_by_reason ?? {};
  return [
    facts(Object.entries(byState).map(([state, count]) => [DELIVERY_STATES[state] ?? state, integer(count)]), { class: 'facts compact' }),
    Object.keys(byReason).length > 0 &&
      h(
        'p',
        { class: 'hint' },
        'Failed because: ',
        Object.entries(byReason)
          .map(([reason, count]) => `${DEAD_REASONS[reason] ?? reason} (${integer(count)})`)
          .join('; '),
      ),
  ];
}
