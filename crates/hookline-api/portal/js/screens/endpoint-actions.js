// screens/endpoint-actions.js — the buttons that change an endpoint: edit,
// pause / resume (or enable a disabled one) and delete. Used by the endpoint
// list (one set per row) and by the endpoint page, so both behave alike.
// Only for a session with the `endpoints` capability; the caller checks.
// Words through i18n.js; the endpoint's URL is kept out of translation.

import * as api from '../api.js';
import { h } from '../dom.js';
import { t } from '../i18n.js';
import { announce, clearProblem, confirmAction, hidden, showProblem, whileBusy } from '../ui.js';

/**
 * `onEdit()` opens the form; `onChanged(endpoint)` after a pause, resume or
 * enable; `onDeleted()` after a delete. Failures go to `problem`.
 */
export function endpointActions(endpoint, { problem, onEdit, onChanged, onDeleted }) {
  // Names the endpoint for screen readers, where several rows each have an "Edit".
  const which = hidden(` ${endpoint.url}`);
  which.setAttribute('translate', 'no');
  const buttons = [
    h('button', { type: 'button', 'data-test': 'endpoint-edit', 'data-mutating': true, onclick: onEdit }, t('Edit'), which.cloneNode(true)),
  ];
  if (!endpoint.enabled) {
    buttons.push(change('endpoint-enable', t('Enable'), { enabled: true }, t('Endpoint enabled.')));
  } else if (endpoint.paused) {
    buttons.push(change('endpoint-resume', t('Resume'), { paused: false }, t('Endpoint resumed: waiting deliveries are sent now.')));
  } else {
    buttons.push(change('endpoint-pause', t('Pause'), { paused: true }, t('Endpoint paused: deliveries wait until you resume it.')));
  }
  buttons.push(
    h('button', { type: 'button', class: 'danger', 'data-test': 'endpoint-delete', 'data-mutating': true, onclick: remove }, t('Delete'), which.cloneNode(true)),
  );
  return buttons;

  // Pausing, resuming and enabling can each be undone, so they do not ask first.
  function change(test, label, patch, said) {
    const button = h('button', { type: 'button', 'data-test': test, 'data-mutating': true }, label, which.cloneNode(true));
    button.addEventListener('click', async () => {
      clearProblem(problem);
      try {
        const updated = await whileBusy(button, () => api.updateEndpoint(endpoint.id, patch));
        announce(said);
        onChanged(updated);
      } catch (error) {
        showProblem(problem, error);
      }
    });
    return button;
  }

  async function remove(event) {
    const button = event.currentTarget;
    clearProblem(problem);
    const sure = await confirmAction({
      title: t('Delete this endpoint?'),
      message: t(
        '{url} stops receiving events. What it was still owed goes to the failed deliveries, and its history stays until retention removes it. This cannot be undone.',
        { url: endpoint.url },
      ),
      yes: t('Delete endpoint'),
    });
    if (!sure) return;
    try {
      await whileBusy(button, () => api.deleteEndpoint(endpoint.id));
      announce(t('Endpoint deleted.'));
      onDeleted();
    } catch (error) {
      showProblem(problem, error);
    }
  }
}
