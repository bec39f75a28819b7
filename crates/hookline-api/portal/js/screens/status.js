// screens/status.js — `#/status`, where the portal opens: what is wrong now
// with the app's endpoints, grouped by cause (GET …/incidents), worst first —
// "2 endpoints answer 503 Service Unavailable: 312 deliveries wait and are
// retried", since when, each endpoint with its breaker in words, and the way
// out (its page and timeline; Recover for dead deliveries) — or "All good".
// It checks again every 30 seconds while it shows.

import * as api from '../api.js';
import { h, keepingFocus, replace } from '../dom.js';
import { clockTime, dateTime } from '../format.js';
import { msg, t, tn, tx } from '../i18n.js';
import { loading } from '../ui.js';
import { breakerWords } from '../words.js';

const CHECK_EVERY_MS = 30_000;

export async function statusScreen(ctx) {
  ctx.title(t('Status'));
  const heading = h('h1', { tabindex: '-1' }, t('Status'));
  const checked = h('p', { class: 'muted', 'data-test': 'incidents-checked' });
  const body = h('div', {}, loading(t('Checking your endpoints…')));
  ctx.root.append(h('div', { class: 'page-head' }, heading), checked, body);

  let shown = null; // the incidents as last drawn (a redraw would move the focus)
  const draw = async () => {
    const answer = await api.incidents({ signal: ctx.signal });
    checked.textContent = t('Checked at {time}; failed deliveries counted since {since}.', {
      time: clockTime(answer.checked_at),
      since: clockTime(answer.since),
    });
    const text = JSON.stringify(answer.data);
    if (text === shown) return;
    shown = text;
    await keepingFocus(heading, () =>
      replace(body, answer.data.length ? answer.data.map((incident) => card(ctx, incident, answer.since)) : allGood()),
    );
  };
  await draw();
  ctx.every(CHECK_EVERY_MS, () =>
    draw().catch((error) => {
      if (error?.sessionEnded || error?.name === 'AbortError') return;
      checked.textContent = t('Could not check again at {time}: {error}. What shows is from the last check.', {
        time: clockTime(new Date()),
        error: error?.message ?? error,
      });
    }),
  );
}

function allGood() {
  return h(
    'section',
    { class: 'incident incident-good', 'data-test': 'incidents-all-good', 'aria-labelledby': 'all-good' },
    h('h2', { id: 'all-good' }, t('All good')),
    h('p', {}, t('Every endpoint is taking its deliveries: none is failing, disabled or paused, and none refused a delivery lately.')),
    h('p', {}, h('a', { href: '#/endpoints' }, t('See your endpoints'))),
  );
}

const TITLES = {
  failing: msg('Failing'),
  disabled: msg('Disabled'),
  dead_letters: msg('Failed deliveries'),
  paused: msg('Paused'),
};

function card(ctx, incident, since) {
  const id = `incident-${incident.kind}-${incident.endpoints[0]?.endpoint_id ?? 'none'}`;
  return h(
    'section',
    { class: `incident incident-${incident.kind}`, 'data-test': 'incident', 'data-kind': incident.kind, 'aria-labelledby': id },
    h(
      'h2',
      { id },
      TITLES[incident.kind] ? t(TITLES[incident.kind]) : incident.kind,
      incident.since &&
        h(
          'span',
          { class: 'muted' },
          tx(' since {time}', { time: h('time', { datetime: incident.since, title: dateTime(incident.since) }, clockTime(incident.since)) }),
        ),
    ),
    h('p', { class: 'incident-message', 'data-test': 'incident-message' }, incident.message),
    h('ul', { class: 'incident-endpoints' }, incident.endpoints.map((e) => endpointItem(ctx, incident, e, since))),
  );
}

/** A failing endpoint's breaker in words, or its failures in a row while it is closed. */
function failingWords(incident, e) {
  if (incident.kind !== 'failing') return null;
  if (e.breaker !== 'closed') return t('Circuit breaker {breaker}', { breaker: breakerWords(e) });
  // (The English says "failures" for one as well.)
  return tn(e.consecutive_failures, '{n} failures in a row', '{n} failures in a row');
}

function endpointItem(ctx, incident, e, since) {
  const counts = [
    e.waiting ? tn(e.waiting, '{n} waiting', '{n} waiting') : null,
    e.dead ? tn(e.dead, '{n} failed', '{n} failed') : null,
  ].filter(Boolean);
  const way = [];
  if (e.dead && ctx.can('replay')) {
    const query = new URLSearchParams({ endpoint_id: e.endpoint_id, since });
    way.push(h('a', { href: `#/recover?${query}`, 'data-test': 'incident-recover' }, tn(e.dead, 'Recover {n}', 'Recover {n}')));
  }
  const open = incident.kind === 'failing' ? t('Timeline and health') : t('Open the endpoint');
  way.push(h('a', { href: `#/endpoints/${encodeURIComponent(e.endpoint_id)}` }, open));
  return h(
    'li',
    { 'data-test': 'incident-endpoint', 'data-id': e.endpoint_id },
    h('span', { class: 'url', translate: 'no' }, e.url),
    e.description && h('span', { class: 'muted', translate: 'no' }, ` — ${e.description}`),
    h(
      'p',
      { class: 'muted' },
      [failingWords(incident, e), counts.join(', ') || null].filter(Boolean).join(' · '),
    ),
    e.cause && h('p', { class: 'incident-cause' }, e.cause.message),
    h('p', { class: 'incident-way' }, way.flatMap((link, i) => (i ? [' · ', link] : [link]))),
  );
}
