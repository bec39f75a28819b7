// screens/endpoints.js — `#/endpoints`: the app's endpoints, their status and
// health, and (with `endpoints`) creating, changing, pausing and deleting them.
//
// The list is one request; each row's breaker and success rate come from its
// own GET …/health (cheap: the breaker row and the last 100 attempts), a few
// at a time, filled in as they arrive.

import * as api from '../api.js';
import { h, keepingFocus, replace } from '../dom.js';
import { percent } from '../format.js';
import { announce, clearProblem, empty, loading, problemSlot, showProblem, statusBadge, withTableRoles } from '../ui.js';
import { breakerWords, endpointStatus } from '../words.js';
import { endpointActions } from './endpoint-actions.js';
import { openEndpointForm } from './endpoint-form.js';

const PAGE_SIZE = 50;
// Health requests in flight at once: enough to fill a page quickly, few enough not to queue the server.
const HEALTH_CONCURRENCY = 4;

export async function endpointsScreen(ctx) {
  ctx.title('Endpoints');
  const canChange = ctx.can('endpoints');
  const formHost = h('div');
  const problem = problemSlot();
  const listHost = h('div', {}, loading('Loading endpoints…'));
  const newButton =
    canChange &&
    h('button', { type: 'button', class: 'primary', 'data-test': 'endpoint-new', 'data-mutating': true, onclick: () => openForm(null) }, 'New endpoint');

  const heading = h('h1', { tabindex: '-1' }, 'Endpoints');
  ctx.root.append(
    h('div', { class: 'page-head' }, heading, newButton),
    h('p', { class: 'lead' }, 'The addresses your events are sent to.'),
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
      { class: 'pager', 'aria-label': 'Endpoint pages' },
      h('button', { type: 'button', disabled: cursors.length === 1, onclick: () => turn(() => cursors.pop()) }, 'Previous'),
      h('button', { type: 'button', disabled: !nextCursor, onclick: () => turn(() => cursors.push(nextCursor)) }, 'Next'),
    );
  }

  function turn(move) {
    move();
    showPage().catch((error) => showProblem(problem, error));
  }

  function endpointTable(endpoints) {
    if (endpoints.length === 0) {
      return empty(canChange ? 'No endpoints yet. Add one with “New endpoint”.' : 'No endpoints yet.');
    }
    return withTableRoles(h(
      'table',
      { class: 'data responsive' },
      h('caption', { class: 'visually-hidden' }, 'Endpoints'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Endpoint'),
          h('th', { scope: 'col' }, 'Status'),
          h('th', { scope: 'col' }, 'Circuit breaker'),
          h('th', { scope: 'col' }, 'Success (last 100 attempts)'),
          canChange && h('th', { scope: 'col' }, 'Actions'),
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
        { scope: 'row', 'data-label': 'Endpoint' },
        h('a', { href: `#/endpoints/${encodeURIComponent(endpoint.id)}`, class: 'url' }, endpoint.url),
        endpoint.description && h('span', { class: 'sub muted' }, endpoint.description),
      ),
      h('td', { 'data-label': 'Status' }, statusBadge(status.key, status.text)),
      h('td', { 'data-label': 'Circuit breaker', 'data-health': 'breaker' }, h('span', { class: 'muted' }, '…')),
      h('td', { 'data-label': 'Success', 'data-health': 'rate' }, h('span', { class: 'muted' }, '…')),
      canChange &&
        h(
          'td',
          { 'data-label': 'Actions' },
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
            health.recent_attempts ? `${percent(health.recent_success_rate)} of ${health.recent_attempts}` : 'No attempts yet',
          );
        } catch (error) {
          if (error.name === 'AbortError' || error.sessionEnded) return;
          replace(row.querySelector('[data-health="breaker"]'), h('span', { class: 'muted' }, 'unavailable'));
          replace(row.querySelector('[data-health="rate"]'), h('span', { class: 'muted' }, 'unavailable'));
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
        announce(endpoint ? 'Endpoint saved.' : `Endpoint created: ${saved.url}.`);
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
