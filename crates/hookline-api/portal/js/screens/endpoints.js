// screens/endpoints.js — `#/endpoints`: the app's endpoints, their status and
// health, and (with `endpoints`) creating, changing, pausing and deleting them.
//
// The list is one request; each row's breaker and success rate come from its
// own GET …/health (cheap: the breaker row and the last 100 attempts), a few
// at a time, filled in as they arrive.

import * as api from '../api.js';
import { h, keepingFocus, replace } from '../dom.js';
import { percent } from '../format.js';
import { t } from '../i18n.js';
import { announce, clearProblem, empty, loading, problemSlot, showProblem, statusBadge, withTableRoles } from '../ui.js';
import { breakerWords, endpointStatus } from '../words.js';
import { endpointActions } from './endpoint-actions.js';
import { openEndpointForm } from './endpoint-form.js';

const PAGE_SIZE = 50;
// Health requests in flight at once: enough to fill a page quickly, few enough not to queue the server.
const HEALTH_CONCURRENCY = 4;

export async function endpointsScreen(ctx) {
  ctx.title(t('Endpoints'));
  const canChange = ctx.can('endpoints');
  const formHost = h('div');
  const problem = problemSlot();
  const listHost = h('div', {}, loading(t('Loading endpoints…')));
  const newButton =
    canChange &&
    h('button', { type: 'button', class: 'primary', 'data-test': 'endpoint-new', 'data-mutating': true, onclick: () => openForm(null) }, t('New endpoint'));

  const heading = h('h1', { tabindex: '-1' }, t('Endpoints'));
  ctx.root.append(
    h('div', { class: 'page-head' }, heading, newButton),
    h('p', { class: 'lead' }, t('The addresses your events are sent to.')),
    formHost,
    problem,
    listHost,
  );

  let cursors = [undefined];
  // `#/endpoints?new=order.paid` (the catalog's "Subscribe an endpoint"):
  // the form opens with that type picked.
  const preset = ctx.query.get('new');
  if (preset && canChange) openForm(null, [preset]).catch((error) => showProblem(problem, error));
  await showPage();

  /** Loads the page at the top of `cursors` and draws it. */
  async function showPage() {
    const before = cursors[cursors.length - 1];
    const page = await api.listEndpoints({ limit: PAGE_SIZE, before }, { signal: ctx.signal });
    replace(listHost, endpointTable(page.data), pager(page.next_cursor));
    fillHealth(page.data);
  }

  function pager(nextCursor) {
    if (cursors.length === 1 && !nextCursor) return null;
    return h(
      'nav',
      { class: 'pager', 'aria-label': t('Endpoint pages') },
      h('button', { type: 'button', disabled: cursors.length === 1, onclick: () => turn(() => cursors.pop()) }, t('Previous')),
      h('button', { type: 'button', disabled: !nextCursor, onclick: () => turn(() => cursors.push(nextCursor)) }, t('Next')),
    );
  }

  function turn(move) {
    move();
    showPage().catch((error) => showProblem(problem, error));
  }

  function endpointTable(endpoints) {
    if (endpoints.length === 0) {
      return empty(canChange ? t('No endpoints yet. Add one with “New endpoint”.') : t('No endpoints yet.'));
    }
    return withTableRoles(h(
      'table',
      { class: 'data responsive' },
      h('caption', { class: 'visually-hidden' }, t('Endpoints')),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, t('Endpoint')),
          h('th', { scope: 'col' }, t('Status')),
          h('th', { scope: 'col' }, t('Circuit breaker')),
          h('th', { scope: 'col' }, t('Success (last 100 attempts)')),
          canChange && h('th', { scope: 'col' }, t('Actions')),
        ),
      ),
      h('tbody', {}, endpoints.map(endpointRow)),
    ));
  }

  function endpointRow(endpoint) {
    const status = endpointStatus(endpoint);
    return h(
      'tr',
      { 'data-test': 'endpoint-row', 'data-id': endpoint.id },
      h(
        'th',
        { scope: 'row', 'data-label': t('Endpoint') },
        h('a', { href: `#/endpoints/${encodeURIComponent(endpoint.id)}`, class: 'url', translate: 'no' }, endpoint.url),
        endpoint.description && h('span', { class: 'sub muted', translate: 'no' }, endpoint.description),
      ),
      h('td', { 'data-label': t('Status') }, statusBadge(status.key, status.text)),
      h('td', { 'data-label': t('Circuit breaker'), 'data-health': 'breaker' }, h('span', { class: 'muted' }, '…')),
      h('td', { 'data-label': t('Success'), 'data-health': 'rate' }, h('span', { class: 'muted' }, '…')),
      canChange &&
        h(
          'td',
          { 'data-label': t('Actions') },
          h(
            'div',
            { class: 'row-actions' },
            endpointActions(endpoint, {
              problem,
              onEdit: () => openForm(endpoint),
              onChanged: () => reload(endpoint.id),
              onDeleted: () => reload(),
            }),
          ),
        ),
    );
  }

  /** Fills each row's breaker and success rate, a few requests at a time. */
  async function fillHealth(endpoints) {
    const queue = [...endpoints];
    const worker = async () => {
      while (queue.length && !ctx.signal.aborted) {
        const endpoint = queue.shift();
        const row = listHost.querySelector(`tr[data-id="${CSS.escape(endpoint.id)}"]`);
        if (!row) continue;
        try {
          const health = await api.endpointHealth(endpoint.id, { signal: ctx.signal });
          replace(row.querySelector('[data-health="breaker"]'), breakerWords(health));
          replace(
            row.querySelector('[data-health="rate"]'),
            health.recent_attempts
              ? t('{rate} of {attempts}', { rate: percent(health.recent_success_rate), attempts: health.recent_attempts })
              : t('No attempts yet'),
          );
        } catch (error) {
          if (error.name === 'AbortError' || error.sessionEnded) return;
          replace(row.querySelector('[data-health="breaker"]'), h('span', { class: 'muted' }, t('unavailable')));
          replace(row.querySelector('[data-health="rate"]'), h('span', { class: 'muted' }, t('unavailable')));
        }
      }
    };
    await Promise.all(Array.from({ length: HEALTH_CONCURRENCY }, worker));
  }

  /**
   * Opens the form to create (`endpoint` null) or change an endpoint;
   * `types` preselects event types for a new one.
   */
  function openForm(endpoint, types = null) {
    clearProblem(problem);
    const close = () => {
      formHost.replaceChildren();
      // A form the catalog opened (`?new=…`) is not opened again by a reload.
      if (ctx.query.has('new')) history.replaceState(null, '', '#/endpoints');
      newButton?.focus();
    };
    return openEndpointForm(formHost, problem, {
      endpoint,
      types,
      onCancel: close,
      onSaved: (saved) => {
        close();
        announce(endpoint ? t('Endpoint saved.') : t('Endpoint created: {url}.', { url: saved.url }));
        reload();
      },
    });
  }

  /**
   * Draws the list again after a change. Focus was on a button the redraw
   * removed: it goes to the changed endpoint's row (else the heading), not
   * to the top of the page.
   */
  function reload(focusId = null) {
    cursors = [undefined];
    const rowLink = () => focusId && listHost.querySelector(`tr[data-id="${CSS.escape(focusId)}"] a`);
    keepingFocus(() => rowLink() || heading, showPage).catch((error) => showProblem(problem, error));
  }
}
