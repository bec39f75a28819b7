// screens/endpoint-timeline.js — "when did it start failing?": an endpoint's
// attempts per time bucket from GET …/timeline (the last hour, day or week),
// as stacked columns (delivered below, failed above), with the breaker's
// openings and closings, disables, enables, pauses and resumes marked; the
// same in words (when failures began, each mark) and as a table. Words
// through i18n.js.

import * as api from '../api.js';
import { timelineChart } from '../chart.js';
import { append, h, replace } from '../dom.js';
import { clockTime, dateTime, integer } from '../format.js';
import { msg, t, tc, tn } from '../i18n.js';
import { loading, problemSlot, showProblem } from '../ui.js';
import { DISABLED_REASONS } from '../words.js';

const WINDOWS = [
  ['hour', msg('Last hour')],
  ['day', msg('Last 24 hours')],
  ['week', msg('Last 7 days')],
];

/** What each mark says, in words (English: `t()` them, as markWords does). */
export const MARKS = {
  breaker_opened: msg('circuit breaker opened'),
  breaker_closed: msg('circuit breaker closed'),
  disabled: msg('disabled'),
  enabled: msg('enabled'),
  paused: msg('paused'),
  resumed: msg('resumed'),
};

export function markWords(mark) {
  const words = MARKS[mark.kind] ? t(MARKS[mark.kind]) : mark.kind;
  const why = mark.kind === 'disabled' && DISABLED_REASONS[mark.reason] && t(DISABLED_REASONS[mark.reason]);
  return why ? `${words} (${why})` : words;
}

/** The section; it loads the default window, and another when chosen. */
export function timelineSection(ctx, endpointId) {
  const chooser = h(
    'select',
    { id: 'timeline-window', 'data-test': 'timeline-window' },
    WINDOWS.map(([key, label]) => h('option', { value: key, selected: key === 'day' }, t(label))),
  );
  const body = h('div', { 'data-test': 'timeline' }, loading(t('Loading the timeline…')));
  let generation = 0; // only the latest window's answer is drawn
  const load = async () => {
    const mine = ++generation;
    const window = chooser.value;
    replace(body, loading(t('Loading the timeline…')));
    try {
      const timeline = await api.endpointTimeline(endpointId, window, { signal: ctx.signal });
      if (mine !== generation) return;
      const found = WINDOWS.find(([key]) => key === window)?.[1];
      const label = found ? t(found) : window;
      replace(body, drawn(timeline, label));
    } catch (error) {
      if (error?.sessionEnded || error?.name === 'AbortError') throw error;
      if (mine !== generation) return;
      const problem = problemSlot();
      replace(body, problem);
      showProblem(problem, error);
    }
  };
  chooser.addEventListener('change', () => load().catch(() => {}));
  load().catch(() => {});
  return append(
    h('section', { class: 'section', 'aria-labelledby': 'timeline-heading' }, h('h2', { id: 'timeline-heading' }, t('Timeline'))),
    [h('div', { class: 'field inline' }, h('label', { for: 'timeline-window' }, t('Window')), chooser), body],
  );
}

function drawn(timeline, label) {
  const buckets = timeline.buckets ?? [];
  const marks = timeline.marks ?? [];
  const delivered = buckets.reduce((n, b) => n + b.delivered, 0);
  const failed = buckets.reduce((n, b) => n + b.failed, 0);
  const summary = sentence(timeline, label, delivered, failed);
  return [
    h('p', { 'data-test': 'timeline-summary' }, summary),
    h('figure', { class: 'chart-figure timeline-figure' }, timelineChart({ summary, buckets, marks, since: timeline.since, until: timeline.until, words: markWords }),
      h(
        'figcaption',
        {},
        h('span', { class: 'key key-ok' }, t('delivered')),
        ' ',
        h('span', { class: 'key key-bad' }, t('failed')),
        marks.length ? [' · ', t('lines: changes below')] : '',
      )),
    marks.length
      ? h('ul', { class: 'marks', 'data-test': 'timeline-marks' }, marks.map((m) => h('li', {}, h('time', { datetime: m.at, title: dateTime(m.at) }, clockTime(m.at)), ` ${markWords(m)}`)))
      : null,
    timeline.complete_since &&
      h(
        'p',
        { class: 'hint' },
        t('Busy: counted are the latest {count} attempts, whole since {time}.', {
          count: integer(timeline.sample_cap),
          time: dateTime(timeline.complete_since),
        }),
      ),
    table(buckets),
  ];
}

/**
 * "Last 24 hours: 1,204 delivered, 31 failed. Failing since 14:02." — when
 * the newest attempts fail, since the first bucket of that unbroken run.
 */
function sentence(timeline, label, delivered, failed) {
  const totals = t('{window}: {delivered} delivered, {failed} failed.', {
    window: label,
    delivered: integer(delivered),
    failed: integer(failed),
  });
  if (!delivered && !failed) return t('{window}: no attempts.', { window: label });
  const busy = (timeline.buckets ?? []).filter((b) => b.delivered + b.failed > 0);
  const newest = busy[busy.length - 1];
  if (!newest?.failed || newest.delivered) {
    const lastFailure = [...busy].reverse().find((b) => b.failed);
    return `${totals} ${lastFailure ? t('Last failure around {time}.', { time: clockTime(lastFailure.start) }) : t('No failures.')}`;
  }
  let start = busy.length - 1;
  while (start > 0 && busy[start - 1].failed && !busy[start - 1].delivered) start -= 1;
  return `${totals} ${t('Failing since about {time}.', { time: clockTime(busy[start].start) })}`;
}

/** The buckets that hold attempts, as a table (for reading exact figures). */
function table(buckets) {
  const busy = buckets.filter((b) => b.delivered + b.failed > 0);
  if (!busy.length) return null;
  return h(
    'details',
    {},
    h('summary', {}, tn(busy.length, 'As a table ({n} period with attempts)', 'As a table ({n} periods with attempts)')),
    h(
      'table',
      { class: 'timeline-table' },
      h('caption', { class: 'visually-hidden' }, t('Attempts per period')),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, t('From')), h('th', { scope: 'col' }, tc('count', 'Delivered')), h('th', { scope: 'col' }, tc('count', 'Failed')))),
      h('tbody', {}, busy.map((b) => h('tr', {}, h('th', { scope: 'row' }, h('time', { datetime: b.start }, dateTime(b.start))), h('td', {}, integer(b.delivered)), h('td', {}, integer(b.failed))))),
    ),
  );
}
