// screens/endpoint-form.js — the form that creates an endpoint or changes one.
//
// The server validates (URL, private addresses, rate limit range, event type
// patterns), so the form does not second-guess it (`novalidate`): whatever
// the server refuses is shown in the form, from the problem's detail.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { clearProblem, field, problemSlot, showProblem, whileBusy } from '../ui.js';

/**
 * Loads the event catalog and opens the form in `host`, focused on its URL;
 * a catalog that cannot be loaded is shown in `problem` instead.
 */
export async function openEndpointForm(host, problem, { endpoint = null, onSaved, onCancel }) {
  let catalog;
  try {
    catalog = await api.listEventTypes();
  } catch (error) {
    showProblem(problem, error);
    return;
  }
  const form = endpointForm({ endpoint, catalog, onSaved, onCancel });
  replace(host, form);
  form.querySelector('#endpoint-url').focus();
}

/**
 * `endpoint`: the EndpointView to change, or null to create one. `catalog`:
 * the event types to offer. `onSaved(endpoint)` after the server took it;
 * `onCancel()` when the person backs out.
 */
export function endpointForm({ endpoint = null, catalog, onSaved, onCancel }) {
  const creating = !endpoint;
  const url = h('input', {
    id: 'endpoint-url',
    name: 'url',
    type: 'url',
    required: true,
    autocomplete: 'url',
    spellcheck: 'false',
    placeholder: 'https://example.com/webhooks',
    value: endpoint?.url ?? '',
  });
  const description = h('input', {
    id: 'endpoint-description',
    name: 'description',
    type: 'text',
    maxlength: 1024,
    value: endpoint?.description ?? '',
  });
  const rateLimit = h('input', {
    id: 'endpoint-rate-limit',
    name: 'rate_limit_per_sec',
    type: 'number',
    min: 1,
    max: 100000,
    step: 1,
    inputmode: 'numeric',
    value: endpoint?.rate_limit_per_sec ?? '',
  });
  const filter = h('input', {
    id: 'endpoint-filter',
    name: 'filter',
    type: 'text',
    maxlength: 2048,
    spellcheck: 'false',
    autocomplete: 'off',
    placeholder: '/amount >= 100 and /currency in ["EUR", "USD"]',
    value: endpoint?.filter ?? '',
  });
  const types = eventTypeChoices(catalog, endpoint?.event_types ?? null);
  const problem = problemSlot();
  const save = h(
    'button',
    { type: 'submit', class: 'primary', 'data-test': 'endpoint-save', 'data-mutating': true },
    creating ? 'Create endpoint' : 'Save changes',
  );

  const form = h(
    'form',
    { class: 'panel endpoint-form', 'data-test': 'endpoint-form', 'data-mutating': true, novalidate: true, 'aria-labelledby': 'endpoint-form-title' },
    h('h2', { id: 'endpoint-form-title' }, creating ? 'New endpoint' : 'Change endpoint'),
    field('URL', url, 'Where Hookline sends events: an https:// (or http://) address your server answers.'),
    field('Description (optional)', description),
    field('Rate limit (deliveries per second, optional)', rateLimit, 'Leave empty for no limit.'),
    types.fieldset,
    field(
      'Payload filter (optional)',
      filter,
      'Only events whose payload passes it: JSON Pointer tests such as /amount >= 100, combined with and, or, not. Leave empty for every event of the types above.',
    ),
    problem,
    h('div', { class: 'actions' }, save, h('button', { type: 'button', onclick: () => onCancel() }, 'Cancel')),
  );

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearProblem(problem);
    const body = {
      url: url.value.trim(),
      description: description.value,
      event_types: types.selected(),
      rate_limit_per_sec: rateLimit.value.trim() === '' ? null : Number(rateLimit.value),
      filter: filter.value.trim() === '' ? null : filter.value.trim(),
    };
    try {
      const saved = await whileBusy(save, () => (creating ? api.createEndpoint(body) : api.updateEndpoint(endpoint.id, body)));
      onSaved(saved);
    } catch (error) {
      showProblem(problem, error);
    }
  });
  return form;
}

/**
 * One checkbox per catalog type (with its description), plus any pattern the
 * endpoint already has that the catalog does not list (`invoice.*`, or a type
 * removed since), so saving does not drop it. None ticked means every type.
 */
function eventTypeChoices(catalog, current) {
  const chosen = new Set(current ?? []);
  const known = new Set(catalog.map((t) => t.name));
  const extra = [...chosen].filter((name) => !known.has(name));
  const boxes = [
    ...catalog.map((t) => checkbox(t.name, t.description + (t.deprecated ? ' (deprecated)' : ''), chosen.has(t.name))),
    ...extra.map((name) => checkbox(name, name.endsWith('*') ? 'every type in this group' : 'not in the catalog', true)),
  ];
  const fieldset = h(
    'fieldset',
    { class: 'event-types', 'aria-describedby': 'event-types-hint' },
    h('legend', {}, 'Event types'),
    h(
      'p',
      { class: 'hint', id: 'event-types-hint' },
      boxes.length
        ? 'Tick the types this endpoint receives. None ticked: it receives every event type.'
        : 'The event catalog is empty: this endpoint receives every event type.',
    ),
    boxes.length > 0 && h('ul', { class: 'checklist' }, boxes.map((box) => h('li', {}, box))),
  );
  return {
    fieldset,
    /** The ticked names, or null for "every type" (the API's `event_types: null`). */
    selected() {
      const names = [...fieldset.querySelectorAll('input[name="event_types"]:checked')].map((box) => box.value);
      return names.length ? names : null;
    },
  };
}

function checkbox(name, description, checked) {
  return h(
    'label',
    { class: 'check' },
    h('input', { type: 'checkbox', name: 'event_types', value: name, checked }),
    h('span', { class: 'check-text' }, h('code', {}, name), description && h('span', { class: 'muted' }, ` — ${description}`)),
  );
}
