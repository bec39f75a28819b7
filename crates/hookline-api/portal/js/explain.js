// explain.js — one sentence that tells a customer why a delivery is where it is.
//
// `explain(delivery, attempts, health, now, endpoint)` is a pure function of
// what the API answered and the clock: no DOM, no requests, so it can be read
// (and tested) on its own. The reasoning is the CASES table below: the first
// row whose `when` holds speaks. To handle a new situation, add a row where it
// belongs in the order (more specific rows first).
//
// Inputs (shapes from crates/hookline-api/src/views.rs):
// - delivery: DeliveryView (state, attempts in this round, next_attempt_at, parked, dead_reason…)
// - attempts: AttemptView[], newest first, across rounds (may be empty)
// - health:   EndpointHealthView or null (breaker, consecutive_failures, next_probe_at, enabled…)
// - now:      Date
// - endpoint: EndpointView or null (paused, enabled, retry.max_attempts when overridden)

import { clockTime, duration } from './format.js';
import { DISABLED_REASONS, httpStatus } from './words.js';

export function explain(delivery, attempts = [], health = null, now = new Date(), endpoint = null) {
  const facts = gather(delivery, attempts ?? [], health, toDate(now), endpoint);
  const row = CASES.find((c) => c.when(facts));
  return row ? row.say(facts) : `This delivery is ${delivery.state}.`;
}

function toDate(value) {
  return value instanceof Date ? value : new Date(value);
}

/** What the cases look at, worked out once. */
function gather(delivery, attempts, health, now, endpoint) {
  const latest = attempts[0] ?? null;
  // The newest attempt belongs to the current round only if the round has attempts
  // (a replay starts a new round with none).
  const latestOfRound = delivery.attempts > 0 ? latest : null;
  return {
    delivery,
    state: delivery.state,
    attempts,
    latest,
    latestOfRound,
    health,
    endpoint,
    now,
    // The deployment's own limit is not in the API; an endpoint's override is.
    maxAttempts: endpoint?.retry?.max_attempts ?? null,
    retryAfter: header(latestOfRound?.response_headers, 'retry-after'),
  };
}

function header(headers, name) {
  if (!headers) return null;
  const found = Object.keys(headers).find((k) => k.toLowerCase() === name);
  return found ? headers[found] : null;
}

const pending = (f) => f.state === 'pending';

/** The rows, most specific first. `name` says what the row is for. */
const CASES = [
  // --- delivered -----------------------------------------------------------
  {
    name: 'delivered when sent again (replay or resend)',
    when: (f) => f.state === 'succeeded' && f.delivery.attempts <= 1 && f.latest?.trigger === 'replay',
    say: (f) => `Delivered when it was sent again${inTime(f.latest)}.`,
  },
  {
    name: 'delivered on the first attempt',
    when: (f) => f.state === 'succeeded' && f.delivery.attempts <= 1,
    say: (f) => `Delivered on the first attempt${inTime(f.latest)}.`,
  },
  {
    name: 'delivered after retries',
    when: (f) => f.state === 'succeeded',
    say: (f) =>
      `Delivered on attempt ${f.delivery.attempts}${inTime(f.latest)}, after ${plural(f.delivery.attempts - 1, 'failed attempt')}.`,
  },

  // --- dead (in the dead-letter queue) --------------------------------------
  {
    name: 'endpoint deleted',
    when: (f) => f.state === 'dead' && f.delivery.dead_reason === 'endpoint_deleted',
    say: () => 'The endpoint was deleted while this delivery was waiting, so there is nowhere to send it again.',
  },
  {
    name: '410 Gone',
    when: (f) => f.state === 'dead' && f.delivery.dead_reason === 'gone',
    say: () =>
      'Your endpoint answered 410 Gone, so Hookline disabled it and stopped sending. Enable the endpoint again, then replay.',
  },
  {
    name: 'redirect',
    when: (f) => f.state === 'dead' && f.delivery.dead_reason === 'redirect',
    say: (f) =>
      `Your endpoint answered ${statusOf(f.latest, 'a redirect')}. Hookline does not follow redirects: change the endpoint's URL to the final address, then replay.`,
  },
  {
    name: 'refused with a 4xx',
    when: (f) => f.state === 'dead' && f.delivery.dead_reason === 'client_error',
    say: (f) =>
      `Your endpoint answered ${statusOf(f.latest, 'a 4xx status')}. Hookline does not retry 4xx answers: fix the endpoint, then replay.`,
  },
  {
    name: 'forbidden destination',
    when: (f) => f.state === 'dead' && f.delivery.dead_reason === 'destination_forbidden',
    say: () =>
      "Your endpoint's address resolves to a private or otherwise forbidden network, so Hookline did not connect. Use a public address, then replay.",
  },
  {
    name: 'retries exhausted by age',
    when: (f) =>
      f.state === 'dead' &&
      f.delivery.dead_reason === 'retries_exhausted' &&
      f.maxAttempts !== null &&
      f.delivery.attempts < f.maxAttempts,
    say: (f) =>
      `Hookline gave up after ${plural(f.delivery.attempts, 'attempt')}: the delivery grew older than the endpoint's retry window. The last attempt ${failure(f.latest)}. Fix the endpoint, then replay.`,
  },
  {
    name: 'retries exhausted',
    when: (f) => f.state === 'dead' && f.delivery.dead_reason === 'retries_exhausted',
    say: (f) =>
      `Hookline gave up after ${attemptsOfMax(f)}. The last attempt ${failure(f.latest)}. Fix the endpoint, then replay.`,
  },
  {
    name: 'dead, reason unknown',
    when: (f) => f.state === 'dead',
    say: (f) => `Hookline stopped trying: the last attempt ${failure(f.latest)}. Fix the endpoint, then replay.`,
  },

  // --- waiting ---------------------------------------------------------------
  {
    name: 'being sent',
    when: (f) => f.state === 'in_flight',
    say: () => 'Being sent to your endpoint right now.',
  },
  {
    name: 'behind an earlier event',
    when: (f) => f.state === 'blocked',
    say: (f) =>
      `Waiting for an earlier event with the same ordering key${f.delivery.ordering_key ? ` (${f.delivery.ordering_key})` : ''} to be delivered first.`,
  },
  {
    name: 'parked: endpoint paused',
    when: (f) => pending(f) && f.delivery.parked && f.endpoint?.paused,
    say: () => 'Your endpoint is paused: this delivery waits, and is sent as soon as you resume the endpoint.',
  },
  {
    name: 'parked: endpoint disabled',
    when: (f) => pending(f) && f.delivery.parked && (f.endpoint?.enabled === false || f.health?.enabled === false),
    say: (f) => {
      const reason = f.endpoint?.disabled_reason ?? f.health?.disabled_reason;
      const why = DISABLED_REASONS[reason] ? ` (${DISABLED_REASONS[reason]})` : '';
      return `Your endpoint is disabled${why}: this delivery is kept, and is sent once the endpoint is enabled again.`;
    },
  },
  {
    name: 'parked',
    when: (f) => pending(f) && f.delivery.parked,
    say: () => 'Your endpoint is paused or disabled: this delivery is kept, and is sent once it takes deliveries again.',
  },
  {
    name: 'breaker open',
    when: (f) => pending(f) && f.health?.breaker === 'open',
    say: (f) => {
      const failed = f.health.consecutive_failures
        ? `your endpoint failed ${f.health.consecutive_failures} times in a row`
        : 'your endpoint kept failing';
      const probe = f.health.next_probe_at ? `; the next probe is at ${clockTime(f.health.next_probe_at, f.now)}` : '';
      return `The circuit breaker is open: ${failed}${probe}. Deliveries wait until a probe succeeds.`;
    },
  },
  {
    name: 'breaker half-open',
    when: (f) => pending(f) && f.health?.breaker === 'half_open',
    say: () =>
      'The circuit breaker is half-open: Hookline is probing your endpoint with one request, and sends the rest once it succeeds.',
  },
  {
    name: 'asked to wait (Retry-After)',
    when: (f) => pending(f) && f.retryAfter && [429, 503].includes(f.latestOfRound?.status_code),
    say: (f) =>
      `Your endpoint answered ${httpStatus(f.latestOfRound.status_code)} and asked to wait (Retry-After: ${f.retryAfter}); ${nextRetry(f)}.`,
  },
  {
    name: 'timed out',
    when: (f) => pending(f) && f.latestOfRound?.error_kind === 'timeout',
    say: (f) => `Timed out after ${duration(f.latestOfRound.duration_ms)}; ${nextRetry(f)}.`,
  },
  {
    name: 'failed, retrying',
    when: (f) => pending(f) && f.latestOfRound,
    say: (f) => `${failureSentence(f.latestOfRound)}; ${nextRetry(f)}.`,
  },
  {
    name: 'replayed, first attempt of the new round',
    when: (f) => pending(f) && f.attempts.length > 0,
    say: (f) => `Sent again: the first attempt of the new round is ${due(f)}.`,
  },
  {
    name: 'new, first attempt',
    when: (f) => pending(f),
    say: (f) => `Waiting for its first attempt, ${due(f)}.`,
  },
];

/** " in 42 ms" when the attempt is known. */
function inTime(attempt) {
  return attempt && attempt.duration_ms !== null && attempt.duration_ms !== undefined
    ? ` in ${duration(attempt.duration_ms)}`
    : '';
}

function statusOf(attempt, otherwise) {
  return attempt?.status_code ? httpStatus(attempt.status_code) : otherwise;
}

/**
 * What went wrong with an attempt, to follow "The last attempt …":
 * "got 503 Service Unavailable", "timed out after 15 s", …
 */
function failure(attempt) {
  if (!attempt) return 'did not succeed';
  if (attempt.status_code) return `got ${httpStatus(attempt.status_code)} from your endpoint`;
  const clause = {
    timeout: () => `timed out after ${duration(attempt.duration_ms)}`,
    connect: () => 'could not connect: the connection was refused or reset',
    dns: () => "could not resolve your endpoint's host name",
    tls: () => 'failed in the TLS (HTTPS) handshake',
    io: () => `failed while sending or reading${detail(attempt)}`,
    destination_forbidden: () => 'was refused: the address resolves to a private or forbidden network',
  }[attempt.error_kind];
  return clause ? clause() : `did not succeed${detail(attempt)}`;
}

/** The same, as a sentence's start: "Your endpoint answered 503 Service Unavailable". */
function failureSentence(attempt) {
  if (attempt.status_code) return `Your endpoint answered ${httpStatus(attempt.status_code)}`;
  const sentence = {
    connect: 'Could not connect to your endpoint: the connection was refused or reset',
    dns: "Your endpoint's host name could not be resolved",
    tls: 'The TLS (HTTPS) handshake with your endpoint failed',
    io: `The connection to your endpoint failed while sending or reading${detail(attempt)}`,
    destination_forbidden: "Your endpoint's address resolves to a private or forbidden network",
  }[attempt.error_kind];
  return sentence ?? `The last attempt failed${detail(attempt)}`;
}

function detail(attempt) {
  return attempt.error_message ? ` (${attempt.error_message})` : '';
}

/** "retry 3 of 8 at 14:02" (of N only when the endpoint names its limit). */
function nextRetry(f) {
  const number = f.delivery.attempts + 1;
  const of = f.maxAttempts ? ` of ${f.maxAttempts}` : '';
  const next = f.delivery.next_attempt_at;
  if (!next) return `attempt ${number}${of} is coming`;
  return new Date(next) <= f.now
    ? `attempt ${number}${of} is due now`
    : `retry ${number}${of} at ${clockTime(next, f.now)}`;
}

function due(f) {
  const next = f.delivery.next_attempt_at;
  if (!next || new Date(next) <= f.now) return 'due now';
  return `due at ${clockTime(next, f.now)}`;
}

function attemptsOfMax(f) {
  const n = f.delivery.attempts;
  return f.maxAttempts ? `${n} of ${f.maxAttempts} attempts` : plural(n, 'attempt');
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The table itself, for a reader who wants to list the cases (and for tests). */
export const EXPLANATION_CASES = CASES.map((c) => c.name);
