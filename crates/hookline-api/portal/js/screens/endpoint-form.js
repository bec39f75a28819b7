// screens/endpoint-form.js — the form that creates an endpoint or changes one.
//
// The server validates (URL, private addresses, rate limit range, event type
// patterns), so the form does not second-guess it (`novalidate`): whatever
// the server refuses is shown in the form, from the problem's detail. Words
// through i18n.js; the placeholders are examples (an address, a filter, type
// names) and stay as they are.

import * as api from '../api.js';
import { advancedSettings } from './endpoint-advanced.js';
import { transformField } from './endpoint-transform.js';
import { h, replace } from '../dom.js';
import { integer } from '../format.js';
import { t, tx } from '../i18n.js';
import { clearProblem, field, problemSlot, shortTimeEl, showProblem, tieProblem, untieProblem, whileBusy } from '../ui.js';

/**
 * Loads the event catalog and opens the form in `host`, focused on its URL;
 * a catalog that cannot be loaded is shown in `problem` instead.
 */
export async function openEndpointForm(host, problem, { endpoint = null, types = null, onSaved, onCancel }) {
  let catalog;
  try {
    catalog = await api.listEventTypes();
  } catch (error) {
    showProblem(problem, error);
    return;
  }
  const form = endpointForm({ endpoint, types, catalog, onSaved, onCancel });
  replace(host, form);
  form.querySelector('#endpoint-url').focus();
}

/**
 * `endpoint`: the EndpointView to change, or null to create one. `catalog`:
 * the event types to offer. `onSaved(endpoint)` after the server took it;
 * `onCancel()` when the person backs out.
 */
export function endpointForm({ endpoint = null, types: preset = null, catalog, onSaved, onCancel }) {
  const creating = !endpoint;
  const url = h('input', {
    id: 'endpoint-url',
    name: 'url',
    type: 'url',
    required: true,
    autocomplete: 'url',
    spellcheck: 'false',
    placeholder: 'https://example.com/webhooks',
    translate: 'no',
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
    translate: 'no',
    dir: 'ltr',
    value: endpoint?.filter ?? '',
  });
  const types = eventTypeChoices(catalog, endpoint ? endpoint.event_types : preset);
  const advanced = advancedSettings(endpoint, url);
  const transform = transformField(endpoint, catalog);
  const problem = problemSlot();
  const save = h(
    'button',
    { type: 'submit', class: 'primary', 'data-test': 'endpoint-save', 'data-mutating': true },
    creating ? t('Create endpoint') : t('Save changes'),
  );

  const form = h(
    'form',
    { class: 'panel endpoint-form', 'data-test': 'endpoint-form', 'data-mutating': true, novalidate: true, 'aria-labelledby': 'endpoint-form-title' },
    h('h2', { id: 'endpoint-form-title' }, creating ? t('New endpoint') : t('Change endpoint')),
    field(
      t('URL'),
      url,
      t('Where events are sent: an {https} (or {http}) address your server answers.', { https: 'https://', http: 'http://' }),
    ),
    field(t('Description (optional)'), description),
    field(t('Rate limit (deliveries per second, optional)'), rateLimit, t('Leave empty for no limit.')),
    types.fieldset,
    field(
      t('Payload filter (optional)'),
      filter,
      t(
        'Only events whose payload passes it: {pointer} tests such as {example}, combined with {and}, {or}, {not}. Leave empty for every event of the types above.',
        { pointer: 'JSON Pointer', example: '/amount >= 100', and: 'and', or: 'or', not: 'not' },
      ),
    ),
    filterPreview(filter, types),
    transform.section,
    advanced.section,
    problem,
    h('div', { class: 'actions' }, save, h('button', { type: 'button', onclick: () => onCancel() }, t('Cancel'))),
  );

  /** The control a refusal is about, by its problem code or the field its detail names. */
  const controlOf = (error) => {
    if (error?.control) return error.control;
    if (error?.code === 'no_event_type_picked') return types.fieldset.querySelector('input[value="some"]');
    if (error?.code === 'destination_forbidden') return url;
    if (error?.code === 'invalid_filter') return filter;
    if (error?.code === 'invalid_transform') return transform.control;
    const detail = String(error?.detail ?? error?.message ?? '');
    const named = [
      ['url', url],
      ['description', description],
      ['rate_limit_per_sec', rateLimit],
      ['filter', filter],
      ['headers', advanced.controls[0]],
      ['auth', advanced.controls[1]],
      ['retry', advanced.controls[5]],
      ['max_in_flight', advanced.controls[7]],
      ['batch.max_events', advanced.controls[11]],
      ['batch.max_wait_ms', advanced.controls[12]],
      ['batching', advanced.controls[10]],
      ['batch', advanced.controls[10]],
    ].find(([name]) => detail.startsWith(name) || detail.includes(`${name} `));
    // A refusal inside the folded section opens it, so its field can be seen.
    if (named && advanced.controls.includes(named[1])) advanced.section.open = true;
    return named?.[1] ?? null;
  };
  const controls = [url, description, rateLimit, filter, transform.control, types.fieldset.querySelector('input[value="some"]'), ...advanced.controls].filter(Boolean);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearProblem(problem);
    for (const control of controls) untieProblem(control, problem);
    try {
      const body = {
        url: url.value.trim(),
        description: description.value,
        event_types: types.selected(),
        rate_limit_per_sec: rateLimit.value.trim() === '' ? null : Number(rateLimit.value),
        filter: filter.value.trim() === '' ? null : filter.value.trim(),
        transform: transform.value(),
        ...advanced.changes(),
      };
      const saved = await whileBusy(save, () => (creating ? api.createEndpoint(body) : api.updateEndpoint(endpoint.id, body)));
      onSaved(saved);
    } catch (error) {
      showProblem(problem, error);
      const control = controlOf(error);
      if (control) tieProblem(control, problem);
    }
  });
  return form;
}

/**
 * Which event types the endpoint receives, said plainly: "All event types,
 * now and future" or "Only the types I pick" (never "none ticked means all").
 * One checkbox per catalog type (with its description), plus any pattern the
 * endpoint already has that the catalog does not list (`invoice.*`, or a type
 * removed since), so saving does not drop it; a search narrows the list.
 * Ticking a type chooses "only these"; choosing "all" unticks them.
 */
function eventTypeChoices(catalog, current) {
  const chosen = new Set(current ?? []);
  const known = new Set(catalog.map((type) => type.name));
  const extra = [...chosen].filter((name) => !known.has(name));
  const boxes = [
    ...catalog.map((type) => {
      // The description is the provider's own words (not the portal's to translate).
      const own = type.description && h('span', { translate: 'no' }, type.description);
      const description = type.deprecated ? tx('{name} (deprecated)', { name: own ?? '' }) : own;
      return checkbox(type.name, description, chosen.has(type.name));
    }),
    ...extra.map((name) => checkbox(name, name.endsWith('*') ? t('every type in this group') : t('not in the catalog'), true)),
  ];
  const radio = (value, label, checked) =>
    h('label', { class: 'check' }, h('input', { type: 'radio', name: 'event_types_scope', value, checked, 'data-test': `types-${value}` }), h('span', { class: 'check-text' }, label));
  const all = radio('all', t('All event types, now and future'), current === null);
  const some = radio('some', t('Only the types I pick'), current !== null);
  const search = h('input', { id: 'types-search', type: 'search', autocomplete: 'off', 'data-test': 'types-search', placeholder: 'order., invoice.paid…', translate: 'no' });
  const items = boxes.map((box) => h('li', {}, box));
  const list = h('ul', { class: 'checklist' }, items);
  const scope = (value) => all.closest('fieldset')?.querySelector(`input[value="${value}"]`);
  list.addEventListener('change', (event) => {
    if (event.target.checked) scope('some').checked = true;
  });
  // "All" keeps the picks (patterns the catalog lacks among them): they are
  // simply not sent, and are there again if "only" is chosen back.
  search.addEventListener('input', () => {
    const terms = search.value.trim().toLowerCase().split(/[\s,]+/).filter(Boolean);
    for (const item of items) {
      const text = item.textContent.toLowerCase();
      item.hidden = !terms.every((term) => text.includes(term));
    }
  });
  const fieldset = h(
    'fieldset',
    { class: 'event-types', 'aria-describedby': 'event-types-hint', 'data-test': 'event-types' },
    h('legend', {}, t('Event types')),
    boxes.length
      ? [
          all,
          some,
          boxes.length > 6 && field(t('Search types'), search),
          h(
            'p',
            { class: 'hint', id: 'event-types-hint' },
            t('Pick the types this endpoint receives; a type added to the catalog later reaches it only with “All event types”.'),
          ),
          list,
        ]
      : h('p', { class: 'hint', id: 'event-types-hint' }, t('The event catalog is empty: this endpoint receives every event type.')),
  );
  return {
    fieldset,
    /**
     * The ticked names, or null for "every type" (the API's `event_types:
     * null`); throws a Problem-like error when "only" has none ticked.
     */
    selected() {
      if (!boxes.length || scope('all')?.checked) return null;
      const names = [...fieldset.querySelectorAll('input[name="event_types"]:checked')].map((box) => box.value);
      if (!names.length) {
        const error = new Error(t('Pick at least one event type, or choose “All event types”.'));
        error.name = 'Problem';
        error.code = 'no_event_type_picked';
        throw error;
      }
      return names;
    },
  };
}

function checkbox(name, description, checked) {
  return h(
    'label',
    { class: 'check' },
    h('input', { type: 'checkbox', name: 'event_types', value: name, checked }),
    h('span', { class: 'check-text' }, h('code', {}, name), description && h('span', { class: 'muted' }, ' — ', description)),
  );
}

/**
 * "Try it on recent events": the filter and the types as the form has them,
 * run over the app's latest events (POST …/filter-preview), each shown as
 * passed or dropped. Saves nothing.
 */
function filterPreview(filter, types) {
  const result = h('div', { class: 'filter-preview', 'data-test': 'filter-preview', role: 'status' });
  const problem = problemSlot();
  const run = h('button', { type: 'button', 'data-test': 'filter-preview-run' }, t('Try it on recent events'));
  run.addEventListener('click', async () => {
    clearProblem(problem);
    untieProblem(filter, problem);
    replace(result);
    try {
      const body = { filter: filter.value.trim() === '' ? null : filter.value.trim(), event_types: types.selected() };
      const answer = await whileBusy(run, () => api.filterPreview(body));
      if (!answer.data.length) {
        replace(result, h('p', {}, t('None of your {count} latest events is of these types.', { count: integer(answer.scanned) })));
        return;
      }
      replace(
        result,
        h(
          'p',
          { 'data-test': 'filter-preview-summary' },
          t('{passed} of the {count} latest events of these types would have been sent.', {
            passed: integer(answer.passed),
            count: integer(answer.data.length),
          }),
        ),
        h(
          'ul',
          { class: 'filter-preview-events' },
          answer.data.map((e) =>
            h(
              'li',
              { 'data-test': 'filter-preview-event', 'data-passed': String(e.passed) },
              h('span', { class: e.passed ? 'passed' : 'dropped' }, e.passed ? t('Sent') : t('Dropped')),
              ' ',
              h('code', {}, e.event_type),
              ' ',
              shortTimeEl(e.created_at),
              ' ',
              h('a', { href: `#/deliveries?event_id=${encodeURIComponent(e.event_id)}` }, h('span', { class: 'visually-hidden' }, t('Deliveries of ')), e.event_id),
            ),
          ),
        ),
      );
    } catch (error) {
      showProblem(problem, error);
      if (error?.code === 'invalid_filter') tieProblem(filter, problem);
    }
  });
  return h('div', { class: 'field' }, h('div', { class: 'actions' }, run), problem, result);
}
