// screens/endpoint.js — `#/endpoints/{id}`: one endpoint. Its status and
// breaker, stats over the last hour / day / week, its signing secret (with
// `secrets`), a test send (with `endpoints`) and its delivery log. Its words
// go through i18n.js; the URL and description are the customer's own.

import * as api from '../api.js';
import { h, keepingFocus, replace } from '../dom.js';
import { dateTime } from '../format.js';
import { t, tc } from '../i18n.js';
import { hashFor } from '../router.js';
import { copyableId, facts, loading, problemSlot, showProblem, statusBadge, timeEl } from '../ui.js';
import { breakerWords, endpointStatus } from '../words.js';
import { deliveryLog } from './deliveries.js';
import { endpointActions } from './endpoint-actions.js';
import { openEndpointForm } from './endpoint-form.js';
import { secretSection } from './endpoint-secret.js';
import { statsSection } from './endpoint-stats.js';
import { timelineSection } from './endpoint-timeline.js';
import { signatureSection } from './endpoint-signature.js';
import { testSendSection } from './endpoint-test.js';

export async function endpointScreen(ctx) {
  const id = ctx.params.id;
  ctx.title(t('Endpoint'));
  const heading = h('h1', { tabindex: '-1', class: 'url', translate: 'no' }, t('Endpoint'));
  const overview = h('div', {}, loading(t('Loading the endpoint…')));
  ctx.root.append(
    h('p', { class: 'breadcrumb' }, h('a', { href: '#/endpoints' }, t('Endpoints'))),
    heading,
    overview,
  );

  const [endpoint, health, stats] = await Promise.all([
    api.getEndpoint(id, { signal: ctx.signal }),
    api.endpointHealth(id, { signal: ctx.signal }).catch(keepError),
    api.endpointStats(id, { signal: ctx.signal }).catch(keepError),
  ]);
  ctx.title(t('Endpoint {url}', { url: endpoint.url }));
  heading.textContent = endpoint.url;
  drawOverview(endpoint, health);

  ctx.root.append(timelineSection(ctx, endpoint.id), statsSection(stats));
  if (ctx.can('secrets')) ctx.root.append(secretSection(endpoint));
  if (ctx.can('endpoints')) ctx.root.append(testSendSection(ctx, endpoint));
  ctx.root.append(signatureSection(endpoint));
  ctx.root.append(
    h(
      'section',
      { class: 'section', 'aria-labelledby': 'endpoint-deliveries' },
      h('h2', { id: 'endpoint-deliveries' }, t('Deliveries')),
      deliveryLog(ctx, { filters: {}, endpointId: endpoint.id }),
    ),
  );

  /** Status, breaker and the buttons that change the endpoint (redrawn after a change). */
  function drawOverview(current, currentHealth) {
    const problem = problemSlot();
    const editHost = h('div');
    const status = endpointStatus(current);
    const actions = ctx.can('endpoints')
      ? endpointActions(current, {
          problem,
          onEdit: () => openEdit(current, editHost, problem),
          onChanged: (updated) => redraw(updated),
          onDeleted: () => {
            location.hash = '#/endpoints';
          },
        })
      : [];
    const recover =
      ctx.can('replay') &&
      h('a', { class: 'button', href: hashFor(['recover'], { endpoint_id: current.id }) }, t('Recover failed deliveries'));
    replace(
      overview,
      current.description && h('p', { class: 'lead', translate: 'no' }, current.description),
      facts([
        [t('Endpoint id'), copyableId(current.id, 'endpoint')],
        [t('Status'), statusBadge(status.key, status.text)],
        [t('Circuit breaker'), currentHealth instanceof Error ? unavailable(currentHealth) : h('span', { 'data-test': 'endpoint-breaker' }, breakerWords(currentHealth))],
        [t('Failing since'), currentHealth?.failing_since ? timeEl(currentHealth.failing_since) : null],
        [t('Last error'), currentHealth?.last_error ? h('span', { class: 'error-text' }, currentHealth.last_error) : null],
        ...pollingFacts(currentHealth?.polling),
        [t('Event types'), current.event_types ? h('span', { translate: 'no' }, current.event_types.join(', ')) : t('All event types')],
        [t('Payload filter'), current.filter ? h('code', { 'data-test': 'endpoint-filter' }, current.filter) : t('None')],
        [t('Transform'), transformWords(current.transform)],
        [t('Rate limit'), current.rate_limit_per_sec ? t('{rate} per second', { rate: current.rate_limit_per_sec }) : t('None')],
        [tc('date', 'Created'), dateTime(current.created_at)],
      ]),
      (actions.length > 0 || recover) && h('div', { class: 'actions' }, actions, recover),
      problem,
      editHost,
    );
  }

  async function redraw(updated) {
    const fresh = await api.endpointHealth(updated.id, { signal: ctx.signal }).catch(keepError);
    keepingFocus(heading, () => drawOverview(updated, fresh));
    heading.textContent = updated.url;
  }

  function openEdit(current, host, problem) {
    return openEndpointForm(host, problem, {
      endpoint: current,
      onCancel: () => {
        host.replaceChildren();
        heading.focus();
      },
      onSaved: (saved) => redraw(saved),
    });
  }
}

/** A part that failed to load shows so, without stopping the rest of the page. */
function keepError(error) {
  if (error.name === 'AbortError' || error.sessionEnded || error.status === 404) throw error;
  return error;
}

function unavailable(error) {
  return h('span', { class: 'muted' }, t('unavailable ({reason})', { reason: error.message }));
}

/** An endpoint's transform in words: none, a chat's preset by name, or the program. */
/**
 * A polling endpoint's receiver: how far it has committed, how many numbers
 * wait for it, and when it last committed (none for an endpoint that is sent to).
 */
function pollingFacts(polling) {
  if (!polling) return [];
  return [
    [
      t('Your receiver has handled'),
      h('span', { 'data-test': 'endpoint-polling' }, t('up to number {committed} of {last}', { committed: polling.committed_seq, last: polling.last_seq })),
    ],
    [t('Waiting to be fetched'), h('span', { 'data-test': 'endpoint-polling-waiting' }, String(polling.waiting))],
    [t('Last commit'), polling.committed_at ? timeEl(polling.committed_at) : t('None yet')],
  ];
}

function transformWords(transform) {
  const presets = { slack: 'Slack', teams: 'Microsoft Teams', discord: 'Discord' };
  if (transform == null) return t('None: the event as published');
  if (Object.hasOwn(presets, transform)) return t('{chat} message', { chat: presets[transform] });
  return h('pre', { class: 'code', dir: 'ltr', translate: 'no', 'data-test': 'endpoint-transform' }, transform);
}
