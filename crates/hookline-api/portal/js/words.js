// words.js — the API's vocabulary in the customer's words.
//
// One home for every label the portal shows for a state, a reason or a
// status, so a badge, a filter and a sentence never disagree. Pure data and
// functions (no DOM).

import { clockTime } from './format.js';

/** Delivery states (`DeliveryState`, plus the view's `parked` flag) as short labels. */
export const DELIVERY_STATES = {
  pending: 'Pending',
  in_flight: 'Sending',
  succeeded: 'Succeeded',
  dead: 'Failed',
  blocked: 'Blocked',
  parked: 'Parked',
};

/** The state a delivery shows as: a parked delivery is pending, but held. */
export function shownState(delivery) {
  return delivery.parked ? 'parked' : delivery.state;
}

export function deliveryStateLabel(delivery) {
  const state = shownState(delivery);
  return DELIVERY_STATES[state] ?? state;
}

/** Why a delivery was dead-lettered (`DeadReason`). */
export const DEAD_REASONS = {
  retries_exhausted: 'gave up after retrying',
  client_error: 'refused by your endpoint (4xx)',
  redirect: 'redirected (3xx): redirects are not followed',
  gone: 'your endpoint answered 410 Gone',
  destination_forbidden: 'the address is not allowed',
  endpoint_deleted: 'the endpoint was deleted',
};

/** Why an endpoint is disabled (`EndpointView.disabled_reason`). */
export const DISABLED_REASONS = {
  manual: 'disabled by hand',
  gone: 'your endpoint answered 410 Gone',
  failing: 'it kept failing for too long',
};

/** An endpoint's status: `{key, text}`, key one of enabled / paused / disabled. */
export function endpointStatus(endpoint) {
  if (!endpoint.enabled) {
    const why = DISABLED_REASONS[endpoint.disabled_reason] ?? endpoint.disabled_reason;
    return { key: 'disabled', text: why ? `Disabled: ${why}` : 'Disabled' };
  }
  if (endpoint.paused) return { key: 'paused', text: 'Paused: deliveries wait until you resume' };
  return { key: 'enabled', text: 'Enabled' };
}

/** The circuit breaker in words: "closed: sending normally", "open: … next probe at 14:05". */
export function breakerWords(health, now = new Date()) {
  switch (health?.breaker) {
    case 'closed':
      return 'closed: sending normally';
    case 'open': {
      const failures = health.consecutive_failures
        ? `${health.consecutive_failures} failures in a row`
        : 'repeated failures';
      const probe = health.next_probe_at ? `; next probe at ${clockTime(health.next_probe_at, now)}` : '';
      return `open: paused after ${failures}${probe}`;
    }
    case 'half_open':
      return 'half-open: probing with one request';
    default:
      return 'unknown';
  }
}

/** Transport failures (`TransportError`), as the end of "…, because …". */
export const ERROR_KINDS = {
  timeout: 'the request timed out',
  connect: 'the connection was refused or reset',
  dns: 'the host name could not be resolved',
  tls: 'the TLS (HTTPS) handshake failed',
  io: 'the connection failed while sending or reading',
  destination_forbidden: 'the address resolves to a private or forbidden network',
};

const REASON_PHRASES = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content',
  301: 'Moved Permanently', 302: 'Found', 303: 'See Other', 307: 'Temporary Redirect', 308: 'Permanent Redirect',
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
  408: 'Request Timeout', 409: 'Conflict', 410: 'Gone', 413: 'Payload Too Large', 415: 'Unsupported Media Type',
  422: 'Unprocessable Entity', 429: 'Too Many Requests',
  500: 'Internal Server Error', 501: 'Not Implemented', 502: 'Bad Gateway', 503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** 503 → "503 Service Unavailable"; an unusual code stays a number. */
export function httpStatus(code) {
  const phrase = REASON_PHRASES[code];
  return phrase ? `${code} ${phrase}` : String(code);
}

/** Attempt triggers (`AttemptTrigger`). */
export const TRIGGERS = {
  first: 'first attempt',
  retry: 'retry',
  probe: 'breaker probe',
  replay: 'replay or resend',
};

/** Attempt verdicts (`AttemptVerdict`). */
export const VERDICTS = {
  delivered: 'Delivered',
  retry: 'Will retry',
  dead: 'Gave up',
};
