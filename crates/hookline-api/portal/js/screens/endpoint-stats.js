// screens/endpoint-stats.js — an endpoint's figures from GET …/stats: the
// chosen window's attempts, success rate and latency percentiles, charts of
// all three windows side by side, and its deliveries by state. Words through
// i18n.js.

import { barChart } from '../chart.js';
import { append, h, replace } from '../dom.js';
import { integer, percent } from '../format.js';
import { isolate, msg, t, tc } from '../i18n.js';
import { facts, showProblem, problemSlot } from '../ui.js';
import { DEAD_REASONS, DELIVERY_STATES } from '../words.js';

const WINDOWS = [
  ['hour', msg('Last hour'), msg('1 h')],
  ['day', msg('Last 24 hours'), msg('24 h')],
  ['week', msg('Last 7 days'), msg('7 d')],
];
const PERCENTILES = ['p50', 'p95', 'p99'];

/** `stats`: the stats answer, or the Error that stopped it loading. */
export function statsSection(stats) {
  const section = h(
    'section',
    { class: 'section', 'aria-labelledby': 'stats-heading' },
    h('h2', { id: 'stats-heading' }, t('Performance')),
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
    WINDOWS.map(([key, label]) => h('option', { value: key, selected: key === 'day' }, t(label))),
  );
  const figures = h('div', { 'aria-live': 'polite' });
  const show = () => replace(figures, windowFacts(stats.windows?.[chooser.value], stats.sample_cap));
  chooser.addEventListener('change', show);
  show();

  return append(section, [
    h('div', { class: 'field inline' }, h('label', { for: 'stats-window' }, t('Window')), chooser),
    figures,
    h('div', { class: 'charts' }, successChart(stats.windows ?? {}), latencyChart(stats.windows ?? {})),
    h('h3', {}, t('Deliveries by state')),
    deliveryCounts(stats),
  ]);
}

function windowFacts(w, sampleCap) {
  if (!w) return h('p', { class: 'empty' }, t('No figures for this window.'));
  const latency = w.latency_ms ?? {};
  return [
    facts([
      [t('Attempts'), integer(w.attempts)],
      [tc('count', 'Delivered'), integer(w.delivered)],
      [t('Success rate'), w.attempts ? percent(w.success_rate) : '—'],
      [t('Latency {percentile}', { percentile: 'p50' }), ms(latency.p50)],
      [t('Latency {percentile}', { percentile: 'p95' }), ms(latency.p95)],
      [t('Latency {percentile}', { percentile: 'p99' }), ms(latency.p99)],
    ]),
    w.sampled && h('p', { class: 'hint' }, t('Figures over the latest {count} attempts of this window.', { count: integer(sampleCap) })),
  ];
}

function ms(value) {
  // The unit's words are format.js's (its duration() says "42 ms" alike).
  return value === null || value === undefined ? '—' : t('{n} ms', { n: integer(value) });
}

function successChart(windows) {
  const rows = WINDOWS.map(([key, label]) => {
    const w = windows[key];
    const rate = w?.attempts ? w.success_rate : null;
    return { label: t(label), value: rate, text: rate === null ? t('no data') : percent(rate) };
  });
  return h(
    'figure',
    { class: 'chart-figure' },
    barChart({ summary: t('Success rate: {values}', { values: rows.map((r) => `${r.label} ${r.text}`).join(', ') }), rows, max: 1 }),
    h('figcaption', {}, t('Success rate (share of attempts answered 2xx)')),
  );
}

function latencyChart(windows) {
  const rows = WINDOWS.flatMap(([key, , short]) =>
    PERCENTILES.map((p) => {
      const value = windows[key]?.latency_ms?.[p] ?? null;
      return { group: key, label: `${t(short)} ${isolate(p)}`, value, text: ms(value) };
    }),
  );
  const max = Math.max(0, ...rows.map((r) => r.value ?? 0));
  return h(
    'figure',
    { class: 'chart-figure' },
    barChart({ summary: t('Latency: {values}', { values: rows.map((r) => `${r.label} ${r.text}`).join(', ') }), rows, max }),
    h('figcaption', {}, t('Latency percentiles (milliseconds)')),
  );
}

function deliveryCounts(stats) {
  const byState = stats.deliveries ?? {};
  const byReason = stats.dlq_by_reason ?? {};
  return [
    facts(Object.entries(byState).map(([state, count]) => [t(DELIVERY_STATES[state] ?? state), integer(count)]), { class: 'facts compact' }),
    Object.keys(byReason).length > 0 &&
      h(
        'p',
        { class: 'hint' },
        t('Failed because: {reasons}', {
          reasons: Object.entries(byReason)
            .map(([reason, count]) => `${t(DEAD_REASONS[reason] ?? reason)} (${integer(count)})`)
            .join('; '),
        }),
      ),
  ];
}
