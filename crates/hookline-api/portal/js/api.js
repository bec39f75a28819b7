// api.js — the one client of the Hookline API that every screen calls through.
//
// The portal is a client of the public /v1 API with the session's app-scoped
// key, never a second path to the data: it calls the same routes under
// /portal/api/v1/…, where the session's key travels in an HttpOnly cookie
// (scoped to /portal/, which this script cannot read) and every request names
// its app in `x-portal-app` (which picks the cookie, and which no other site's
// request can carry). Every failure becomes a `Problem`
// (the API's RFC 9457 problem+json, or one made up for a network failure),
// so screens show `problem.message` and nothing else. A 401 means the session
// is over (expired or revoked): it is reported once, to `onSessionEnded`, and
// every later call fails at once without reaching the network. Every request
// asks for the portal's language (`Accept-Language`), in which the server
// words its explanations; a problem's `detail` stays English (the API's), so
// in another language `problem.message` says first, in the reader's words,
// what happened (PROBLEM_WORDS, by the problem's `code`).

import { isolate, language, msg, t } from './i18n.js';

/** An API failure, as the server described it. */
export class Problem extends Error {
  constructor({ status = 0, title = 'Error', detail = '', code = '', type = '' } = {}) {
    // What a person reads (the language is chosen before any request).
    super(shownText({ title, detail, code }));
    this.name = 'Problem';
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.code = code;
    this.type = type;
    // Set on the 401 that ended the session: the session-ended page shows it,
    // so the screen that made the call must not show it again.
    this.sessionEnded = false;
  }
}

/** What happened, by the problem's `code`, in a few words: the start of `message` in a language other than English. */
const PROBLEM_WORDS = {
  unauthorized: msg('The session is not valid'),
  admin_only: msg('Only the provider can do this'),
  missing_capability_read: msg('Your access does not allow viewing'),
  missing_capability_publish: msg('Your access does not allow sending events'),
  missing_capability_endpoints: msg('Your access does not allow changing endpoints'),
  missing_capability_secrets: msg('Your access does not allow managing secrets'),
  missing_capability_replay: msg('Your access does not allow sending deliveries again'),
  missing_capability_messages: msg('Your access does not allow fetching signed messages'),
  not_found: msg('Not found'),
  method_not_allowed: msg('The server does not allow this action'),
  malformed_json: msg('The request was not valid JSON'),
  invalid_query: msg('The server refused a parameter'),
  validation_failed: msg('The server refused a value'),
  invalid_filter: msg('The filter is not valid'),
  payload_too_large: msg('The request is too large'),
  idempotency_key_reused: msg('The request key was already used for another request'),
  destination_forbidden: msg('The address is not allowed'),
  unknown_event_type: msg('Unknown event type'),
  schema_violation: msg('The payload does not match its event type'),
  conflict: msg('Conflicts with the current state'),
  portal_code_invalid: msg('The link is not valid'),
  portal_code_used: msg('The link was already used'),
  portal_code_expired: msg('The link has expired'),
  endpoint_deleted: msg('The endpoint was deleted'),
  rate_limited: msg('Too many requests'),
  database_unavailable: msg('The service is unavailable for now'),
  internal: msg('Server error'),
  network: msg('Network error'),
};

/**
 * A problem's `message`: in English the detail, else the title, as the server
 * wrote them; in another language the code's words, then `: ` and the
 * server's (English) detail as data. A problem without known words (made here,
 * in the reader's words already) reads as in English.
 */
function shownText({ title, detail, code }) {
  const words = Object.hasOwn(PROBLEM_WORDS, code) ? t(PROBLEM_WORDS[code]) : null;
  if (language() === 'en' || !words) return detail || title;
  if (!detail) return words;
  // The network problem's detail is the portal's own, already in the reader's language.
  return `${words}: ${code === NETWORK_PROBLEM.code ? detail : isolate(detail)}`;
}

/** The portal's own problem when the server cannot be reached (its texts for `t()`). */
const NETWORK_PROBLEM = {
  title: msg('Network error'),
  detail: msg('Could not reach the server. Check your connection and try again.'),
  code: 'network',
};

const client = {
  app: null,
  token: null,
  onSessionEnded: () => {},
  ended: false,
};

/**
 * Signs the client in: every later call names `app`, whose cookie is the key;
 * `token` (only in a frame, where a browser may send no cookie of another
 * site) is the key itself, kept in memory and sent as the bearer.
 */
export function configure({ app, token = null, onSessionEnded }) {
  client.app = app;
  client.token = token;
  client.onSessionEnded = onSessionEnded ?? (() => {});
  client.ended = false;
}

/**
 * One request. `query` values that are empty are left out; `auth: false` is
 * for the sign-in exchange, which has no key yet (its 401 is a bad link, not
 * an ended session). Resolves to the JSON answer (`null` for 204).
 */
export async function request(method, path, { query, body, signal, auth = true } = {}) {
  if (auth && client.ended) throw endedProblem();
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json', 'Accept-Language': language() };
  if (auth) headers['x-portal-app'] = client.app;
  if (auth && client.token) headers.Authorization = `Bearer ${client.token}`;
  // The /v1 routes are reached under /portal/api, where the cookie is sent.
  const url = path.startsWith('/v1/') ? `/portal/api${path}` : path;
  let response;
  try {
    response = await fetch(url + queryString(query), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: 'no-store',
    });
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    const { title, detail, code } = NETWORK_PROBLEM;
    throw new Problem({ status: 0, title: t(title), detail: t(detail), code });
  }
  if (response.status === 204) return null;
  const data = await readJson(response);
  if (response.ok) return data;
  const problem = problemFrom(response, data);
  if (auth && response.status === 401) endSession(problem);
  throw problem;
}

function endSession(problem) {
  problem.sessionEnded = true;
  if (client.ended) return;
  client.ended = true;
  client.onSessionEnded(problem);
}

function endedProblem() {
  const problem = new Problem({ status: 401, title: t('Unauthorized'), detail: t('the session has ended') });
  problem.sessionEnded = true;
  return problem;
}

async function readJson(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** The answer's problem+json, or one built from the status when there is none (a proxy's page). */
function problemFrom(response, data) {
  if (data && typeof data === 'object' && (data.title || data.detail)) {
    return new Problem({ ...data, status: data.status ?? response.status });
  }
  return new Problem({
    status: response.status,
    title: response.statusText || `HTTP ${response.status}`,
    detail: t('The server answered {status}.', {
      status: `${response.status}${response.statusText ? ` ${response.statusText}` : ''}`,
    }),
  });
}

function queryString(query) {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** `/v1/apps/{app}/part/part…`, each part escaped (ids come from the URL hash). */
function appPath(...parts) {
  return ['/v1/apps', client.app, ...parts].map((p, i) => (i === 0 ? p : encodeURIComponent(p))).join('/');
}

// ---------------------------------------------------------------------------
// The routes the portal uses, one function each (docs/api.md has them all).
// `options` is `{ signal }` for reads a screen may abandon.

/** `POST /portal/session {code}`: a one-time link code for a session key. */
export const exchangeCode = (code) => request('POST', '/portal/session', { body: { code }, auth: false });
/** `DELETE /portal/session`: signs this session out; its key stops working. */
export const signOut = () => request('DELETE', '/portal/session');
export const renewSession = () => request('POST', '/portal/session/renew');

/** No request after this one sends the session's key (signed out). */
export function forget() {
  client.ended = true;
}

export const getApp = (options) => request('GET', appPath(), options);

export const listEndpoints = (query, options) => request('GET', appPath('endpoints'), { ...options, query });
export const getEndpoint = (id, options) => request('GET', appPath('endpoints', id), options);
export const createEndpoint = (body) => request('POST', appPath('endpoints'), { body });
export const updateEndpoint = (id, body) => request('PATCH', appPath('endpoints', id), { body });
export const deleteEndpoint = (id) => request('DELETE', appPath('endpoints', id));
export const endpointHealth = (id, options) => request('GET', appPath('endpoints', id, 'health'), options);
export const endpointStats = (id, options) => request('GET', appPath('endpoints', id, 'stats'), options);
export const incidents = (options) => request('GET', appPath('incidents'), options);
export const endpointTimeline = (id, window, options) =>
  request('GET', appPath('endpoints', id, 'timeline'), { ...options, query: { window } });
export const endpointSecret = (id) => request('GET', appPath('endpoints', id, 'secret'));
export const rotateSecret = (id, body) => request('POST', appPath('endpoints', id, 'secret', 'rotate'), { body });
export const checkSignature = (id, body) => request('POST', appPath('endpoints', id, 'signature-check'), { body });
export const testSend = (id, body) => request('POST', appPath('endpoints', id, 'test'), { body });
export const filterPreview = (body) => request('POST', appPath('filter-preview'), { body });
export const transformPreview = (body) => request('POST', appPath('transform-preview'), { body });
export const listNotificationChannels = (options) => request('GET', appPath('notifications'), options);
export const createNotificationChannel = (body) => request('POST', appPath('notifications'), { body });
export const deleteNotificationChannel = (id) => request('DELETE', appPath('notifications', id));

export const listDeliveries = (query, options) => request('GET', appPath('deliveries'), { ...options, query });
export const getDelivery = (id, options) => request('GET', appPath('deliveries', id), options);
export const deliveryAttempts = (id, query, options) =>
  request('GET', appPath('deliveries', id, 'attempts'), { ...options, query });
export const getAttempt = (id, options) => request('GET', appPath('attempts', id), options);
export const replayDelivery = (id) => request('POST', appPath('deliveries', id, 'replay'));
export const resendDelivery = (id) => request('POST', appPath('deliveries', id, 'resend'));

export const getEvent = (id, options) => request('GET', appPath('events', id), options);

export const startBulkReplay = (body) => request('POST', appPath('replays'), { body });
export const getBulkReplay = (id, options) => request('GET', appPath('replays', id), options);
export const cancelBulkReplay = (id) => request('POST', appPath('replays', id, 'cancel'));

// The catalog changes rarely (admins edit it) and several screens need it:
// one request serves them for a minute.
const CATALOG_TTL_MS = 60_000;
let catalog = null;

/** `GET /v1/event-types`: the whole catalog, by name (`fresh` skips the minute's cache). */
export function listEventTypes({ fresh = false } = {}) {
  if (fresh || !catalog || Date.now() - catalog.at > CATALOG_TTL_MS) {
    const promise = request('GET', '/v1/event-types').then((page) => page.data);
    promise.catch(() => {
      if (catalog?.promise === promise) catalog = null;
    });
    catalog = { at: Date.now(), promise };
  }
  return catalog.promise;
}

/** Every endpoint of the app (for selectors and labels), following cursors. */
export async function allEndpoints(options) {
  const endpoints = [];
  let before;
  do {
    const page = await listEndpoints({ limit: 250, before }, options);
    endpoints.push(...page.data);
    before = page.next_cursor;
  } while (before);
  return endpoints;
}
