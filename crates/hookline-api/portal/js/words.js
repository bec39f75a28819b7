// words.js — the API's vocabulary in the customer's words.
//
// One home for every label the portal shows for a state, a reason or a
// status, so a badge, a filter and a sentence never disagree. Pure data and
// functions (no DOM). The tables hold English texts marked with `msg()`: read
// them through `t()` (the functions here do).

import { clockTime } from './format.js';
import { msg, t, tn } from './i18n.js';

/** Delivery states (`DeliveryState`, plus the view's `parked` flag) as short labels. */
export const DELIVERY_STATES = {
  pending: msg('Pending'),
  in_flight: msg('Sending'),
  succeeded: msg('Succeeded'),
  dead: msg('Failed'),
  blocked: msg('Blocked'),
  parked: msg('Parked'),
};

/** The state a delivery shows as: a parked delivery is pending, but held. */
export function shownState(delivery) {
  return delivery.parked ? 'parked' : delivery.state;
}

export function deliveryStateLabel(delivery) {
  const state = shownState(delivery);
  return Object.hasOwn(DELIVERY_STATES, state) ? t(DELIVERY_STATES[state]) : state;
}

/** Why a delivery was dead-lettered (`DeadReason`). */
export const DEAD_REASONS = {
  retries_exhausted: msg('gave up after retrying'),
  client_error: msg('refused by your endpoint (4xx)'),
  redirect: msg('redirected (3xx): redirects are not followed'),
  gone: msg('your endpoint answered 410 Gone'),
  destination_forbidden: msg('the address is not allowed'),
  endpoint_deleted: msg('the endpoint was deleted'),
  transform_error: msg("the endpoint's transform failed"),
};

/** Why an endpoint is disabled (`EndpointView.disabled_reason`). */
export const DISABLED_REASONS = {
  manual: msg('disabled by hand'),
  gone: msg('your endpoint answered 410 Gone'),
  failing: msg('it kept failing for too long'),
};

/** An endpoint's status: `{key, text}`, key one of enabled / paused / disabled. */
export function endpointStatus(endpoint) {
  if (!endpoint.enabled) {
    const known = Object.hasOwn(DISABLED_REASONS, endpoint.disabled_reason);
    const why = known ? t(DISABLED_REASONS[endpoint.disabled_reason]) : endpoint.disabled_reason;
    return { key: 'disabled', text: why ? t('Disabled: {reason}', { reason: why }) : t('Disabled') };
  }
  if (endpoint.paused) return { key: 'paused', text: t('Paused: deliveries wait until you resume') };
  return { key: 'enabled', text: t('Enabled') };
}

/** The circuit breaker in words: "closed: sending normally", "open: … next probe at 14:05". */
export function breakerWords(health, now = new Date()) {
  switch (health?.breaker) {
    case 'closed':
      return t('closed: sending normally');
    case 'open': {
      // (The English says "failures" for one too, as it always has.)
      const failures = health.consecutive_failures
        ? tn(health.consecutive_failures, '{n} failures in a row', '{n} failures in a row')
        : t('repeated failures');
      if (!health.next_probe_at) return t('open: paused after {failures}', { failures });
      const time = clockTime(health.next_probe_at, now);
      return t('open: paused after {failures}; next probe at {time}', { failures, time });
    }
    case 'half_open':
      return t('half-open: probing with one request');
    default:
      return t('unknown');
  }
}

/** Transport failures (`TransportError`), as the end of "…, because …". */
export const ERROR_KINDS = {
  timeout: msg('the request timed out'),
  connect: msg('the connection was refused or reset'),
  dns: msg('the host name could not be resolved'),
  tls: msg('the TLS (HTTPS) handshake failed'),
  io: msg('the connection failed while sending or reading'),
  destination_forbidden: msg('the address resolves to a private or forbidden network'),
};

const REASON_PHRASES = {
  200: msg('OK'), 201: msg('Created'), 202: msg('Accepted'), 204: msg('No Content'),
  301: msg('Moved Permanently'), 302: msg('Found'), 303: msg('See Other'),
  307: msg('Temporary Redirect'), 308: msg('Permanent Redirect'),
  400: msg('Bad Request'), 401: msg('Unauthorized'), 403: msg('Forbidden'), 404: msg('Not Found'),
  405: msg('Method Not Allowed'), 408: msg('Request Timeout'), 409: msg('Conflict'), 410: msg('Gone'),
  413: msg('Payload Too Large'), 415: msg('Unsupported Media Type'), 422: msg('Unprocessable Entity'),
  429: msg('Too Many Requests'),
  500: msg('Internal Server Error'), 501: msg('Not Implemented'), 502: msg('Bad Gateway'),
  503: msg('Service Unavailable'), 504: msg('Gateway Timeout'),
};

/** 503 → "503 Service Unavailable" (the phrase in the reader's language); an unusual code stays a number. */
export function httpStatus(code) {
  const phrase = REASON_PHRASES[code];
  return phrase ? `${code} ${t(phrase)}` : String(code);
}

/** Attempt triggers (`AttemptTrigger`). */
export const TRIGGERS = {
  first: msg('first attempt'),
  retry: msg('retry'),
  probe: msg('breaker probe'),
  replay: msg('replay or resend'),
};

/** Attempt verdicts (`AttemptVerdict`). */
export const VERDICTS = {
  delivered: msg('Delivered'),
  retry: msg('Will retry'),
  dead: msg('Gave up'),
};
