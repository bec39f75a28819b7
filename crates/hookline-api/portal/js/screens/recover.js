// screens/recover.js — `#/recover` (the `replay` capability): replay every
// failed delivery of an endpoint since a time, as one bulk replay job.
//
// Three steps, each visible: a dry run that counts what would be replayed
// (`POST …/replays {…, "dry_run": true}` → `{count}`), a confirm button that
// starts the job with the same filter (the count is the confirmation), then
// the job's progress, polled every second until it is no longer running,
// with a cancel button meanwhile. Changing the filter discards the count, so
// what starts is always what was counted.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { integer, localInputToRfc3339, rfc3339ToLocalInput } from '../format.js';
import { t, tn } from '../i18n.js';
import { announce, clearProblem, field, loading, problemSlot, select, showProblem, whileBusy } from '../ui.js';
import { DEAD_REASONS } from '../words.js';

const POLL_MS = 1000;
const DEFAULT_LOOKBACK_MS = 86_400_000;

export async function recoverScreen(ctx) {
  ctx.title(t('Recover failed deliveries'));
  const waiting = loading(t('Loading your endpoints…'));
  ctx.root.append(h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, t('Recover failed deliveries'))), waiting);
  // The form is drawn once the endpoints are known, so its selector is complete
  // when it appears (and the endpoint named in the address can be chosen).
  const endpoints = await api.allEndpoints({ signal: ctx.signal });
  waiting.remove();

  const endpoint = select(
    { id: 'recover-endpoint', name: 'endpoint_id' },
    [['', t('All endpoints')], ...endpoints.map((e) => [e.id, e.description ? `${e.url} — ${e.description}` : e.url])],
    ctx.query.get('endpoint_id') ?? '',
  );
  // An endpoint's option is its URL and description: data, not words to translate.
  for (const option of endpoint.options) {
    if (option.value) option.setAttribute('translate', 'no');
  }
  const since = h('input', {
    id: 'recover-since',
    name: 'since',
    type: 'datetime-local',
    value: rfc3339ToLocalInput(ctx.query.get('since') ?? new Date(Date.now() - DEFAULT_LOOKBACK_MS).toISOString()),
  });
  const reason = select(
    { id: 'recover-reason', name: 'reason' },
    [
      ['', t('Any reason')],
      ...Object.entries(DEAD_REASONS)
        .filter(([key]) => key !== 'endpoint_deleted')
        .map(([key, words]) => [key, t(words)]),
    ],
  );
  const dryRun = h('button', { type: 'submit', class: 'primary', 'data-test': 'recover-dry-run' }, t('Count failed deliveries'));
  const problem = problemSlot();
  const count = h('div', { class: 'recover-count-area' });
  const job = h('div', { class: 'recover-job' });

  const form = h(
    'form',
    { class: 'panel', 'aria-labelledby': 'recover-form-heading' },
    h('h2', { id: 'recover-form-heading' }, t('Which deliveries')),
    h('p', {}, t('Replay every failed delivery of an endpoint that failed since a given time. First count them, then start.')),
    field(t('Endpoint'), endpoint),
    field(t('Failed since'), since, t('In your local time. Leave empty for every failed delivery.')),
    field(t('Reason'), reason),
    h('div', { class: 'actions' }, dryRun),
  );

  ctx.root.append(form, problem, count, job);

  // A changed filter makes the count stale: start over from the dry run.
  form.addEventListener('input', () => count.replaceChildren());
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearProblem(problem);
    const filter = readFilter();
    try {
      const answer = await whileBusy(dryRun, () => api.startBulkReplay({ ...filter, dry_run: true }));
      showCount(answer.count, filter);
    } catch (error) {
      showProblem(problem, error);
    }
  });

  /** The bulk replay's filter (docs/api.md#bulk-replay): only what was chosen. */
  function readFilter() {
    const filter = {};
    if (endpoint.value) filter.endpoint_id = endpoint.value;
    const sinceTime = localInputToRfc3339(since.value);
    if (sinceTime) filter.since = sinceTime;
    if (reason.value) filter.reason = reason.value;
    return filter;
  }

  function showCount(n, filter) {
    const text =
      n === 0
        ? t('No failed deliveries match: there is nothing to replay.')
        : tn(n, '{n} dead delivery would be replayed.', '{n} dead deliveries would be replayed.');
    let confirm = null;
    if (n > 0) {
      confirm = h(
        'button',
        { type: 'button', class: 'danger', 'data-test': 'recover-confirm', 'data-mutating': true },
        tn(n, 'Replay {n} delivery', 'Replay {n} deliveries'),
      );
      confirm.addEventListener('click', () => start(filter, confirm));
    }
    replace(count, h('p', { 'data-test': 'recover-count', role: 'status' }, text), confirm && h('div', { class: 'actions' }, confirm));
  }

  async function start(filter, button) {
    clearProblem(problem);
    try {
      const started = await whileBusy(button, () => api.startBulkReplay(filter));
      count.replaceChildren();
      follow(started);
    } catch (error) {
      showProblem(problem, error);
    }
  }

  /** Shows a job and polls it every second while it runs. */
  function follow(first) {
    const progress = h('progress', { max: 1, value: 0, 'aria-labelledby': 'recover-progress-label' });
    const progressText = h('span', { id: 'recover-progress-label' });
    const status = h('p', { 'data-test': 'recover-status', role: 'status' });
    const cancel = h('button', { type: 'button', class: 'danger', 'data-test': 'recover-cancel', 'data-mutating': true }, t('Cancel replay'));
    const section = h(
      'section',
      { class: 'section', 'aria-labelledby': 'recover-job-heading' },
      h('h2', { id: 'recover-job-heading' }, t('Replay job')),
      h('div', { class: 'progress', 'data-test': 'recover-progress' }, progress, ' ', progressText),
      status,
      h('div', { class: 'actions' }, cancel),
    );
    replace(job, section);

    let stop = () => {};
    const show = (j) => {
      // An empty job is complete at once: show a full bar, not an empty one.
      progress.max = Math.max(j.total, 1);
      progress.value = j.total === 0 && j.state !== 'running' ? 1 : j.done;
      progressText.textContent = t('{done} of {total} reached: {replayed} replayed, {skipped} skipped', {
        done: integer(j.done),
        total: integer(j.total),
        replayed: integer(j.replayed),
        skipped: integer(j.skipped),
      });
      status.textContent = jobStatus(j);
      cancel.hidden = j.state !== 'running';
      if (j.state !== 'running') {
        stop();
        announce(jobStatus(j));
      }
    };
    cancel.addEventListener('click', async () => {
      try {
        show(await whileBusy(cancel, () => api.cancelBulkReplay(first.id)));
      } catch (error) {
        showProblem(problem, error);
      }
    });
    show(first);
    if (first.state !== 'running') return;
    stop = ctx.every(POLL_MS, async () => {
      try {
        show(await api.getBulkReplay(first.id, { signal: ctx.signal }));
      } catch (error) {
        stop();
        showProblem(problem, error);
      }
    });
  }
}

/** "Replay job rpl_… completed: 45 replayed, 2 skipped." */
function jobStatus(j) {
  const tally = t('{replayed} replayed, {skipped} skipped', { replayed: integer(j.replayed), skipped: integer(j.skipped) });
  switch (j.state) {
    case 'running':
      return t('Replay job {id} running: {done} of {total} reached.', { id: j.id, done: integer(j.done), total: integer(j.total) });
    case 'completed':
      return t('Replay job {id} completed: {tally}.', { id: j.id, tally });
    case 'cancelled':
      return t('Replay job {id} cancelled: {tally}; what was replayed stays replayed.', { id: j.id, tally });
    default:
      return t('Replay job {id} {state}: {tally}.', { id: j.id, state: j.state, tally });
  }
}
