// screens/endpoint-test.js — send a test event to one endpoint (the
// `endpoints` capability). The payload starts as the catalog's example of the
// chosen type. Sent unchanged, the request carries no payload at all: the
// server then uses the catalog example, which `endpoints` alone may send
// (routes/endpoints.rs, test_send). An edited payload is the caller's own
// event, which needs `publish` too; the server says so if it is missing.
// Words through i18n.js; event type names are kept out of translation.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { canonicalJson, prettyJson } from '../format.js';
import { t, tx } from '../i18n.js';
import { clearProblem, field, loading, problemSlot, showProblem, whileBusy } from '../ui.js';

export function testSendSection(ctx, endpoint) {
  const body = h('div', { id: 'test-send-panel', hidden: true });
  // A disclosure: the form (and the catalog it needs) only when asked for.
  const open = h(
    'button',
    { type: 'button', 'data-test': 'test-send', 'data-mutating': true, 'aria-expanded': 'false', 'aria-controls': 'test-send-panel' },
    t('Send a test event…'),
  );
  let loaded = false;
  open.addEventListener('click', () => {
    const expanded = open.getAttribute('aria-expanded') !== 'true';
    open.setAttribute('aria-expanded', String(expanded));
    body.hidden = !expanded;
    if (expanded && !loaded) {
      loaded = true;
      load();
    }
  });

  function load() {
    replace(body, loading(t('Loading the event catalog…')));
    api
      .listEventTypes()
      .then((catalog) => replace(body, catalog.length ? testForm(ctx, endpoint, catalog) : noCatalog()))
      .catch((error) => {
        loaded = false;
        const problem = problemSlot();
        replace(body, problem);
        showProblem(problem, error);
      });
  }

  return h(
    'section',
    { class: 'section', 'aria-labelledby': 'test-heading' },
    h('h2', { id: 'test-heading' }, t('Send a test event')),
    h(
      'p',
      {},
      t('Sends one event of a type from the catalog to this endpoint only, through the normal pipeline: signed, retried and listed like any other.'),
    ),
    h('div', { class: 'actions' }, open),
    body,
  );
}

function noCatalog() {
  return h('p', { class: 'empty' }, t('The event catalog is empty, so there is no example event to send yet.'));
}

function testForm(ctx, endpoint, catalog) {
  const byName = new Map(catalog.map((entry) => [entry.name, entry]));
  // It starts on the first type the endpoint receives (any type may be sent).
  const receives = (name) =>
    !endpoint.event_types || endpoint.event_types.some((p) => p === name || (p.endsWith('*') && name.startsWith(p.slice(0, -1))));
  const first = catalog.find((entry) => receives(entry.name))?.name;
  const type = h(
    'select',
    { id: 'test-event-type', name: 'event_type' },
    catalog.map((entry) =>
      h(
        'option',
        { value: entry.name, selected: entry.name === first, translate: entry.deprecated ? null : 'no' },
        entry.deprecated ? t('{name} (deprecated)', { name: entry.name }) : entry.name,
      ),
    ),
  );
  const payload = h('textarea', { id: 'test-payload', name: 'payload', rows: 10, spellcheck: 'false', class: 'code' });
  const exampleNote = h('p', { class: 'hint', id: 'test-payload-hint' });
  payload.setAttribute('aria-describedby', 'test-payload-hint');
  const problem = problemSlot();
  const result = h('div', { 'data-test': 'test-result', role: 'status' });
  const send = h('button', { type: 'submit', class: 'primary', 'data-test': 'test-send-submit', 'data-mutating': true }, t('Send'));

  /** Fills the payload with the chosen type's example (what "unchanged" is measured against). */
  const useExample = () => {
    const example = byName.get(type.value)?.example;
    payload.value = example === undefined || example === null ? '' : prettyJson(example);
    exampleNote.textContent =
      example === undefined || example === null
        ? t('This type has no example: write the payload (sending your own payload needs the {capability} capability).', {
            capability: 'publish',
          })
        : ctx.can('publish')
          ? t('The catalog’s example. Edit it to send your own payload.')
          : t('The catalog’s example, sent as it is. Sending an edited payload needs the {capability} capability.', {
              capability: 'publish',
            });
  };
  type.addEventListener('change', useExample);
  useExample();

  const form = h(
    'form',
    { class: 'test-send', 'data-mutating': true, 'aria-labelledby': 'test-heading' },
    field(t('Event type'), type),
    h('div', { class: 'field' }, h('label', { for: 'test-payload' }, t('Payload (JSON)')), payload, exampleNote),
    problem,
    h('div', { class: 'actions' }, send),
    result,
  );

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearProblem(problem);
    result.replaceChildren();
    const request = { event_type: type.value };
    const own = ownPayload(payload.value, byName.get(type.value)?.example);
    if (own.error) {
      replace(problem, h('p', { class: 'problem', role: 'alert', 'data-test': 'problem' }, own.error));
      return;
    }
    if (own.payload !== undefined) request.payload = own.payload;
    try {
      const sent = await whileBusy(send, () => api.testSend(endpoint.id, request));
      replace(result, sentNote(sent));
    } catch (error) {
      showProblem(problem, error);
    }
  });
  return form;
}

/**
 * `{payload}` to send, `{}` to send none (the text is the example, or empty),
 * or `{error}` when the text is not JSON.
 */
function ownPayload(text, example) {
  if (text.trim() === '') return {};
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { error: t('The payload is not valid JSON: {error}', { error: error.message }) };
  }
  const hasExample = example !== undefined && example !== null;
  return hasExample && canonicalJson(parsed) === canonicalJson(example) ? {} : { payload: parsed };
}

function sentNote(sent) {
  return h(
    'p',
    { class: 'success' },
    tx('Sent: event {event}, delivery {delivery}.', {
      event: h('code', { class: 'id' }, sent.event_id),
      delivery: h(
        'a',
        { href: `#/deliveries/${encodeURIComponent(sent.delivery_id)}`, 'data-test': 'test-delivery-link', translate: 'no' },
        sent.delivery_id,
      ),
    }),
    sent.warnings?.length ? [' ', t('The catalog warns: {warnings}', { warnings: sent.warnings.map((w) => w.detail).join('; ') })] : '',
  );
}
