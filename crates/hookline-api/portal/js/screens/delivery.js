// screens/delivery.js — `#/deliveries/{id}`: one delivery. What happened in
// one sentence (the server's explanation), its event's payload, every attempt (what was
// sent and what came back, and the batch request it went in, if its endpoint
// batches), a live countdown to the next attempt, and
// replay (dead) / resend (succeeded) with the `replay` capability.
//
// After a replay or resend — or when the countdown runs out — the screen
// watches the delivery (every 2 s, for up to a minute) and redraws whenever
// it changes, until it is no longer waiting.
//
// Its words are in the reader's language (i18n.js).

import * as api from '../api.js';
import { h, keepingFocus, replace } from '../dom.js';
import { clockSeconds, clockTime, countdown, dateTime, duration, prettyJson } from '../format.js';
import { msg, t, tc, tn, tx } from '../i18n.js';
import { announce, clearProblem, confirmAction, copyText, copyableId, empty, facts, loading, problemSlot, showProblem, stateBadge, timeEl, whileBusy } from '../ui.js';
import { DEAD_REASONS, TRIGGERS, VERDICTS, httpStatus } from '../words.js';

const WATCH_EVERY_MS = 2000;
const WATCH_FOR_MS = 60_000;
const ATTEMPTS_PAGE = 100;
/** States in which a delivery is still on its way (watched until it leaves them). */
const WAITING = new Set(['pending', 'in_flight', 'blocked']);
/** What is announced when the watched delivery stops waiting, by its new state. */
const NOW_STATES = {
  succeeded: msg('The delivery is now succeeded.'),
  dead: msg('The delivery is now dead.'),
};

export async function deliveryScreen(ctx) {
  const id = ctx.params.id;
  ctx.title(t('Delivery'));
  const heading = h('h1', { tabindex: '-1' }, tx('Delivery {id}', { id: h('code', { class: 'id' }, id) }));
  const status = h('p', { class: 'status-line', role: 'status' });
  const body = h('div', {}, loading(t('Loading the delivery…')));
  ctx.root.append(
    h('p', { class: 'breadcrumb' }, h('a', { href: '#/deliveries' }, t('Deliveries'))),
    heading,
    status,
    body,
  );

  let shown = null; // the delivery as last drawn
  let watching = false;
  let stopCountdown = () => {};

  await draw(await gather(id, ctx.signal));

  /** Everything the page shows, in parallel; only the delivery itself must load. */
  async function gather(deliveryId, signal) {
    const delivery = await api.getDelivery(deliveryId, { signal });
    const [event, attempts, endpoint] = await Promise.allSettled([
      api.getEvent(delivery.event_id, { signal }),
      api.deliveryAttempts(deliveryId, { limit: ATTEMPTS_PAGE }, { signal }),
      api.getEndpoint(delivery.endpoint_id, { signal }),
    ]);
    const value = (settled) => (settled.status === 'fulfilled' ? settled.value : null);
    for (const settled of [event, attempts, endpoint]) {
      // The session ended: the page that says so has replaced this one.
      if (settled.status === 'rejected' && settled.reason?.sessionEnded) throw settled.reason;
    }
    return {
      delivery,
      event: value(event),
      eventError: event.status === 'rejected' ? event.reason : null,
      attempts: value(attempts)?.data ?? [],
      moreAttempts: value(attempts)?.next_cursor ?? null,
      attemptsError: attempts.status === 'rejected' ? attempts.reason : null,
      endpoint: value(endpoint),
    };
  }

  async function draw(data) {
    shown = data.delivery;
    ctx.title(t('Delivery {id}', { id: data.delivery.id }));
    stopCountdown();
    await keepingFocus(heading, () =>
      replace(
        body,
        summary(data),
        h('p', { class: 'explanation', 'data-test': 'delivery-explanation' }, explanationText(data.delivery.explanation)),
        actions(data.delivery),
        payloadSection(data),
        attemptsSection(data),
      ),
    );
  }

  function summary({ delivery, event, endpoint }) {
    const next = delivery.state === 'pending' && delivery.next_attempt_at ? nextAttempt(delivery.next_attempt_at) : null;
    return facts([
      [t('State'), stateBadge(delivery)],
      [t('Event type'), h('code', { class: 'type-name' }, delivery.event_type)],
      [t('Delivery id'), copyableId(delivery.id, 'delivery')],
      [t('Event'), copyableId(delivery.event_id, 'event')],
      [
        t('Endpoint'),
        h(
          'a',
          { href: `#/endpoints/${encodeURIComponent(delivery.endpoint_id)}`, class: 'url', translate: 'no' },
          endpoint?.url ?? delivery.endpoint_id,
        ),
      ],
      [tc('date', 'Created'), timeEl(delivery.created_at)],
      [t('Attempts (this round)'), String(delivery.attempts)],
      [t('Last attempt'), delivery.last_attempt_at ? timeEl(delivery.last_attempt_at) : null],
      [t('Next attempt'), next],
      [t('Waiting for'), delivery.parked ? t('the endpoint to be resumed or enabled') : null],
      [t('Failed because'), delivery.dead_reason ? t(DEAD_REASONS[delivery.dead_reason] ?? delivery.dead_reason) : null],
      [t('Failed at'), delivery.dead_at ? timeEl(delivery.dead_at) : null],
      [
        t('Ordering key'),
        delivery.ordering_key
          ? h('span', { translate: 'no' }, `${delivery.ordering_key} (#${delivery.sequence ?? '?'})`)
          : null,
      ],
    ]);
  }

  /** A countdown to the next attempt; when it runs out, the screen watches for the result. */
  function nextAttempt(at) {
    const text = h('span');
    const el = h('span', { 'data-test': 'next-attempt', role: 'timer', 'aria-live': 'off' }, text, ` (${clockSeconds(at)})`);
    const tick = () => {
      text.textContent = countdown(at);
      if (new Date(at) <= new Date()) {
        stopCountdown();
        watch();
      }
    };
    tick();
    stopCountdown = ctx.every(1000, tick);
    return el;
  }

  function actions(delivery) {
    if (!ctx.can('replay')) return null;
    const problem = problemSlot();
    let button = null;
    if (delivery.state === 'dead') {
      button = actionButton('delivery-replay', t('Replay'), {
        title: t('Replay this delivery?'),
        message: t('The event is sent to the endpoint again, now, with the same {header}, in a new round of attempts.', {
          header: 'webhook-id',
        }),
        yes: t('Replay'),
        call: () => api.replayDelivery(delivery.id),
        done: (answer) => (answer.replayed ? t('Replayed: the delivery is pending again.') : answer.detail),
        problem,
      });
    } else if (delivery.state === 'succeeded') {
      button = actionButton('delivery-resend', t('Resend'), {
        title: t('Send this delivery again?'),
        message: t(
          'Your endpoint gets the same event a second time, with the same {header}. Use it when your side lost what it received.',
          { header: 'webhook-id' },
        ),
        yes: t('Resend'),
        call: () => api.resendDelivery(delivery.id),
        done: (answer) => (answer.resent ? t('Resent: the delivery is pending again.') : answer.detail),
        problem,
      });
    }
    return button && h('div', { class: 'actions' }, button, problem);
  }

  function actionButton(test, label, { title, message, yes, call, done, problem }) {
    const button = h('button', { type: 'button', class: 'primary', 'data-test': test, 'data-mutating': true }, label);
    button.addEventListener('click', async () => {
      clearProblem(problem);
      if (!(await confirmAction({ title, message, yes }))) return;
      try {
        const answer = await whileBusy(button, call);
        status.textContent = done(answer);
        await refresh();
        watch();
      } catch (error) {
        showProblem(problem, error);
      }
    });
    return button;
  }

  async function refresh() {
    await draw(await gather(id, ctx.signal));
  }

  /** Redraws on every change, every 2 s for up to a minute, until the delivery stops waiting. */
  function watch() {
    if (watching) return;
    watching = true;
    const until = Date.now() + WATCH_FOR_MS;
    const stop = ctx.every(WATCH_EVERY_MS, async () => {
      try {
        const now = await api.getDelivery(id, { signal: ctx.signal });
        const changed = now.state !== shown.state || now.attempts !== shown.attempts || now.next_attempt_at !== shown.next_attempt_at;
        if (changed) await refresh();
        if (!WAITING.has(now.state) || Date.now() > until) {
          stop();
          watching = false;
          if (changed && !WAITING.has(now.state)) {
            const words = NOW_STATES[now.state];
            announce(words ? t(words) : t('The delivery is now {state}.', { state: now.state }));
          }
        }
      } catch (error) {
        stop();
        watching = false;
        if (!error.sessionEnded && error.name !== 'AbortError') status.textContent = error.message;
      }
    });
  }
}

function payloadSection({ event, eventError }) {
  const content = event
    ? h('pre', { class: 'code', tabindex: '0' }, prettyJson(event.payload))
    : h(
        'p',
        { class: 'muted' },
        eventError ? t('The event could not be loaded: {error}.', { error: eventError.message }) : t('The event could not be loaded.'),
      );
  return h(
    'section',
    { class: 'section', 'aria-labelledby': 'payload-heading' },
    h('h2', { id: 'payload-heading' }, t('Event')),
    h(
      'details',
      { open: true },
      h('summary', {}, event ? t('Payload of {event_type}', { event_type: event.event_type }) : t('Payload')),
      content,
    ),
  );
}

function attemptsSection({ attempts, moreAttempts, attemptsError }) {
  const list = attempts.length
    ? h('ul', { class: 'attempts' }, attempts.map((a) => h('li', {}, attemptCard(a))))
    : empty(
        attemptsError ? t('The attempts could not be loaded: {error}', { error: attemptsError.message }) : t('No attempts yet.'),
      );
  return h(
    'section',
    { class: 'section', 'aria-labelledby': 'attempts-heading' },
    h(
      'h2',
      { id: 'attempts-heading' },
      moreAttempts ? t('Attempts ({count}+)', { count: attempts.length }) : t('Attempts ({count})', { count: attempts.length }),
    ),
    h('p', { class: 'hint' }, t('Newest first, across replays.')),
    list,
    moreAttempts && h('p', { class: 'hint' }, t('Showing the latest {count} attempts.', { count: attempts.length })),
  );
}

/**
 * The server's explanation (`hookline_core::explain`) as read: its sentence,
 * and the breaker's probe time (a retry's time is the summary's countdown).
 */
function explanationText(explanation) {
  if (!explanation) return '';
  const probe = explanation.code === 'breaker_open' && explanation.next_attempt_at;
  return probe
    ? t('{message} The next probe is at {time}.', { message: explanation.message, time: clockTime(probe) })
    : explanation.message;
}

function attemptCard(a) {
  const outcome = a.status_code
    ? httpStatus(a.status_code)
    : a.error_kind
      ? t('No response: {error}', { error: a.error_kind.replace('_', ' ') })
      : t('No response');
  return h(
    'article',
    { class: `attempt verdict-${a.verdict}`, 'data-test': 'attempt', 'data-id': a.id },
    h(
      'h3',
      {},
      t('Attempt {number}', { number: a.attempt_number }),
      a.trigger && h('span', { class: 'muted' }, ` · ${t(TRIGGERS[a.trigger] ?? a.trigger)}`),
      ' · ',
      outcome,
    ),
    a.explanation && h('p', { class: 'attempt-explanation', 'data-test': 'attempt-explanation' }, a.explanation.message),
    facts([
      [t('Started'), timeEl(a.started_at)],
      [t('Latency'), duration(a.duration_ms)],
      [t('Result'), t(VERDICTS[a.verdict] ?? a.verdict)],
      [t('Response status'), a.status_code ? httpStatus(a.status_code) : null],
      [t('Error'), a.error_kind || a.error_message ? [a.error_kind ?? '', a.error_message ? `: ${a.error_message}` : ''].join('') : null],
      [t('Next attempt'), a.next_attempt_at ? dateTime(a.next_attempt_at) : null],
      [t('Gave up because'), a.dead_reason ? t(DEAD_REASONS[a.dead_reason] ?? a.dead_reason) : null],
      [t('URL'), a.url ? h('span', { class: 'url', translate: 'no' }, a.url) : null],
      [t('Sent in batch'), a.batch ? batchMember(a.batch) : null],
    ]),
    a.url && curlBlock(a),
    headersBlock(t('Request headers sent'), a.request_headers),
    headersBlock(t('Response headers'), a.response_headers),
    a.response_body !== null && a.response_body !== undefined
      ? h(
          'details',
          { open: true },
          h('summary', {}, a.response_body_truncated ? t('Response body (truncated at 64 KiB)') : t('Response body')),
          a.response_body ? h('pre', { class: 'code', tabindex: '0' }, a.response_body) : h('p', { class: 'muted' }, t('Empty body.')),
          a.response_body_truncated && h('p', { class: 'hint' }, t('Truncated: the response was longer; only its first 64 KiB are kept.')),
        )
      : null,
  );
}

/**
 * Where an attempt's delivery was in its batch request: the request's id
 * (its `webhook-id`), how many it carried, and its place (0-based in the
 * API, counted from 1 here).
 */
function batchMember(batch) {
  return h(
    'span',
    { 'data-test': 'attempt-batch' },
    tn(batch.size, '{id} ({n} delivery; this one was number {number})', '{id} ({n} deliveries; this one was number {number})', {
      id: batch.id,
      number: batch.position + 1,
    }),
  );
}

/**
 * "Copy as curl": the attempt's request, its body byte for byte as signed
 * (read from `GET …/attempts/{id}`, which carries it), to replay by hand. A
 * batch's first member keeps the whole request's body; the others keep
 * their own element, which the batch's signature does not verify alone.
 */
function curlBlock(a) {
  const said = h('span', { class: 'copied', role: 'status', 'data-test': 'curl-copied', 'data-id': a.id });
  const shown = h('div');
  const button = h('button', { type: 'button', 'data-test': 'copy-curl', 'data-id': a.id }, t('Copy as curl'));
  button.addEventListener('click', async () => {
    said.textContent = '';
    try {
      const full = await api.getAttempt(a.id);
      if (full.request_body === undefined || full.request_body === null) {
        said.textContent = t('Its event is no longer kept: there is no body to copy.');
        return;
      }
      const command = curlCommand(full);
      const pre = h('pre', { class: 'code', tabindex: '0', 'data-test': 'curl-command' }, command);
      replace(shown, pre);
      said.textContent = (await copyText(command, pre))
        ? t('Copied')
        : t('Could not copy: select the command below and copy it by hand.');
    } catch (error) {
      if (error?.sessionEnded) throw error;
      said.textContent = t('Could not copy: {error}', { error: error?.message ?? error });
    }
  });
  return h(
    'div',
    { class: 'curl' },
    h('p', {}, button, ' ', said),
    h(
      'p',
      { class: 'hint' },
      t(
        'The signature is this attempt’s: a receiver that checks the timestamp’s age refuses it after a few minutes. Your own headers’ values are not kept (…).',
      ),
    ),
    a.batch &&
      h(
        'p',
        { class: 'hint', 'data-test': 'attempt-batch-body' },
        a.batch.position === 0
          ? t('The body is the whole batch, every delivery in it: sent again, each of them arrives again.')
          : t('The body is only this delivery’s element of the batch: the signature is the whole batch’s, so it does not verify this body. The batch’s first delivery keeps the whole request.'),
      ),
    shown,
  );
}

/** A POSIX shell command that sends `attempt`'s request again. */
export function curlCommand(attempt) {
  const quote = (text) => `'${String(text).replaceAll("'", "'\\''")}'`;
  const headers = Object.entries(attempt.request_headers ?? {}).map(([name, value]) => ` \\\n  -H ${quote(`${name}: ${value}`)}`);
  return `curl -X POST ${quote(attempt.url)}${headers.join('')} \\\n  --data-raw ${quote(attempt.request_body)}`;
}

function headersBlock(title, headers) {
  const entries = Object.entries(headers ?? {});
  return h(
    'details',
    {},
    h('summary', {}, `${title} (${entries.length})`),
    entries.length
      ? h(
          'table',
          { class: 'headers' },
          h('caption', { class: 'visually-hidden' }, title),
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, t('Name')), h('th', { scope: 'col' }, t('Value')))),
          h('tbody', {}, entries.map(([name, value]) => h('tr', {}, h('th', { scope: 'row' }, h('code', {}, name)), h('td', {}, h('code', {}, value))))),
        )
      : h('p', { class: 'muted' }, t('None recorded.')),
  );
}
