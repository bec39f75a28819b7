// screens/endpoint-actions.js — the buttons that change an endpoint: edit,
// pause / resume (or enable a disabled one) and delete. Used by the endpoint
// list (one set per row) and by the endpoint page, so both behave alike.
// Only for a session with the `endpoints` capability; the caller checks.

import * as api from '../api.js';
import { h } from '../dom.js';
import { announce, clearProblem, confirmAction, hidden, showProblem, whileBusy } from '../ui.js';

/**
 * `onEdit()` opens the form; `onChanged(endpoint)` after a pause, resume or
 * enable; `onDeleted()` after a delete. Failures go to `problem`.
 */
export function endpointActions(endpoint, { problem, onEdit, onChanged, onDeleted }) {
  // Names the endpoint for screen readers, where several rows each have an "Edit".
  const which = hidden(` ${endpoint.url}`);
  const buttons = [
    h('button', { type: 'button', 'data-test': 'endpoint-edit', 'data-mutating': true, onclick: onEdit }, 'Edit', which.cloneNode(true)),
  ];
  if (!endpoint.enabled) {
    buttons.push(change('endpoint-enable', 'Enable', { enabled: true }, 'Endpoint enabled.'));
  } else if (endpoint.paused) {
    buttons.push(change('endpoint-resume', 'Resume', { paused: false }, 'Endpoint resumed: waiting deliveries are sent now.'));
  } else {
    buttons.push(change('endpoint-pause', 'Pause', { paused: true }, 'Endpoint paused: deliveries wait until you resume it.'));
  }
  buttons.push(
    h('button', { type: 'button', class: 'danger', 'data-test': 'endpoint-delete', 'data-mutating': true, onclick: remove }, 'Delete', which.cloneNode(true)),
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
      title: 'Delete this endpoint?',
      message: `${endpoint.url} stops receiving events. What it was still owed goes to the failed deliveries, and its history stays until retention removes it. This cannot be undone.`,
      yes: 'Delete endpoint',
    });
    if (!sure) return;
    try {
      await whileBusy(button, () => api.deleteEndpoint(endpoint.id));
      announce('Endpoint deleted.');
      onDeleted();
    } catch (error) {
      showProblem(problem, error);
    }
  }
}
