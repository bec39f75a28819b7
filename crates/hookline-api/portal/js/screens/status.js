// screens/status.js — `#/status`, where the portal opens: what is wrong now
// with the app's endpoints, grouped by cause (GET …/incidents), worst first —
// "2 endpoints answer 503 Service Unavailable: 312 deliveries wait and are
// retried", since when, each endpoint with its breaker in words, and the way
// out (its page and timeline; Recover for dead deliveries) — or "All good".
// It checks again every 30 seconds while it shows.

import * as api from '../api.js';
import { h, keepingFocus, replace } from '../dom.js';
import { clockTime, dateTime, integer } from '../format.js';
import { loading } from '../ui.js';
import { breakerWords } from '../words.js';

const CHECK_EVERY_MS = 30_000;

export async function statusScreen(ctx) {
  ctx.title('Status');
  const heading = h('h1', { tabindex: '-1' }, 'Status');
  const checked = h('p', { class: 'muted', 'data-test': 'incidents-checked' });
  const body = h('div', {}, loading('Checking your endpoints…'));
  ctx.root.append(h('div', { class: 'page-head' }, heading), checked, body);

  let shown = null; // the incidents as last drawn (a redraw would move the focus)
  const draw = async () => {
    const answer = await api.incidents({ signal: ctx.signal });
    checked.textContent = `Checked at ${clockTime(answer.checked_at)}; failed deliveries counted since ${clockTime(answer.since)}.`;
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
      checked.textContent = `Could not check again at ${clockTime(new Date())}: ${error?.message ?? error}. What shows is from the last check.`;
    }),
  );
}

function allGood() {
  return h(
    'section',
    { class: 'incident incident-good', 'data-test': 'incidents-all-good', 'aria-labelledby': 'all-good' },
    h('h2', { id: 'all-good' }, 'All good'),
    h('p', {}, 'Every endpoint is taking its deliveries: none is failing, disabled or paused, and none refused a delivery lately.'),
    h('p', {}, h('a', { href: '#/endpoints' }, 'See your endpoints')),
  );
}

const TITLES = {
  failing: 'Failing',
  disabled: 'Disabled',
  dead_letters: 'Failed deliveries',
  paused: 'Paused',
};

function card(ctx, incident, since) {
  const id = `incident-${incident.kind}-${incident.endpoints[0]?.endpoint_id ?? 'none'}`;
  return h(
    'section',
    { class: `incident incident-${incident.kind}`, 'data-test': 'incident', 'data-kind': incident.kind, 'aria-labelledby': id },
    h(
      'h2',
      { id },
      TITLES[incident.kind] ?? incident.kind,
      incident.since && h('span', { class: 'muted' }, ' since ', h('time', { datetime: incident.since, title: dateTime(incident.since) }, clockTime(incident.since))),
    ),
    h('p', { class: 'incident-message', 'data-test': 'incident-message' }, incident.message),
    h('ul', { class: 'incident-endpoints' }, incident.endpoints.map((e) => endpointItem(ctx, incident, e, since))),
  );
}

/** A failing endpoint's breaker in words, or its failures in a row while it is closed. */
function failingWords(incident, e) {
  if (incident.kind !== 'failing') return null;
  if (e.breaker !== 'closed') return `Circuit breaker ${breakerWords(e)}`;
  return `${integer(e.consecutive_failures)} failures in a row`;
}

function endpointItem(ctx, incident, e, since) {
  const counts = [
    e.waiting ? `${integer(e.waiting)} waiting` : null,
    e.dead ? `${integer(e.dead)} failed` : null,
  ].filter(Boolean);
  const way = [];
  if (e.dead && ctx.can('replay')) {
    const query = new URLSearchParams({ endpoint_id: e.endpoint_id, since });
    way.push(h('a', { href: `#/recover?${query}`, 'data-test': 'incident-recover' }, `Recover ${integer(e.dead)}`));
  }
  way.push(h('a', { href: `#/endpoints/${encodeURIComponent(e.endpoint_id)}` }, incident.kind === 'failing' ? 'Timeline and health' : 'Open the endpoint'));
  return h(
    'li',
    { 'data-test': 'incident-endpoint', 'data-id': e.endpoint_id },
    h('span', { class: 'url' }, e.url),
    e.description && h('span', { class: 'muted' }, ` — ${e.description}`),
    h(
      'p',
      { class: 'muted' },
      [failingWords(incident, e), counts.join(', ') || null].filter(Boolean).join(' · '),
    ),
    e.cause && h('p', { class: 'incident-cause' }, e.cause.message),
    h('p', { class: 'incident-way' }, way.flatMap((link, i) => (i ? [' · ', link] : [link]))),
  );
}
