// screens/catalog.js — `#/catalog`: the event types the provider publishes,
// grouped by their first name segment (`invoice.*`), searchable, each with
// its description, its payload's fields as a table (from its JSON Schema),
// the schema and an example, a copy button for its name, and (with
// `endpoints`) "Subscribe an endpoint", which opens the endpoint form with
// the type picked. Event-type names, the schema and the example stay as
// they are; the words around them go through i18n.js.

import * as api from '../api.js';
import { h, replace, uid } from '../dom.js';
import { prettyJson } from '../format.js';
import { t, tn, tx } from '../i18n.js';
import { copyableId, empty, field, loading } from '../ui.js';

export async function catalogScreen(ctx) {
  ctx.title(t('Event catalog'));
  const list = h('div', {}, loading(t('Loading the event catalog…')));
  const search = h('input', { id: 'catalog-search', type: 'search', autocomplete: 'off', 'data-test': 'catalog-search', placeholder: 'invoice, paid…', translate: 'no' });
  const found = h('p', { class: 'muted', role: 'status', 'data-test': 'catalog-found' });
  ctx.root.append(
    h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, t('Event catalog'))),
    h('p', { class: 'lead' }, t('The event types your endpoints can receive, what each means and what its payload looks like.')),
    list,
  );
  const types = await api.listEventTypes({ fresh: true });
  if (!types.length) {
    replace(list, empty(t('The catalog is empty: no event types are described yet.')));
    return;
  }
  const groups = groupByPrefix(types);
  const sections = groups.map(([prefix, members]) => group(ctx, prefix, members));
  replace(list, field(t('Search the catalog'), search), found, sections);
  search.addEventListener('input', () => {
    const terms = search.value.trim().toLowerCase().split(/[\s,]+/).filter(Boolean);
    const words = terms.join(' ');
    let shown = 0;
    for (const section of sections) {
      let inGroup = 0;
      for (const entry of section.querySelectorAll('[data-test=event-type]')) {
        entry.hidden = !terms.every((term) => entry.dataset.search.includes(term));
        if (!entry.hidden) inGroup += 1;
      }
      section.hidden = inGroup === 0;
      shown += inGroup;
    }
    found.textContent = words
      ? tn(shown, '{n} of {total} event types match.', '{n} of {total} event types match.', { total: types.length })
      : '';
  });
}

/** `[[prefix, types]]` by the name's first segment, in name order. */
function groupByPrefix(types) {
  const groups = new Map();
  for (const type of [...types].sort((a, b) => a.name.localeCompare(b.name))) {
    // A name without a dot is in no group: "Other".
    const prefix = type.name.includes('.') ? type.name.split('.')[0] : '';
    if (!groups.has(prefix)) groups.set(prefix, []);
    groups.get(prefix).push(type);
  }
  return [...groups.entries()];
}

function group(ctx, prefix, members) {
  const id = uid('group');
  return h(
    'section',
    { class: 'event-group', 'data-test': 'event-group', 'data-prefix': prefix, 'aria-labelledby': id },
    h('h2', { id }, prefix ? h('code', {}, `${prefix}.*`) : t('Other'), h('span', { class: 'muted' }, ' · ', tn(members.length, '{n} type', '{n} types'))),
    members.map((type) => eventType(ctx, type)),
  );
}

function eventType(ctx, type) {
  const headingId = uid('type');
  return h(
    'article',
    {
      class: 'event-type',
      'data-test': 'event-type',
      'data-name': type.name,
      'data-search': `${type.name} ${type.description ?? ''}`.toLowerCase(),
      'aria-labelledby': headingId,
    },
    h('h3', { id: headingId }, h('code', {}, type.name), type.deprecated && h('span', { class: 'badge badge-deprecated' }, t('Deprecated'))),
    // The description is the provider's own words, in its language.
    type.description ? h('p', { translate: 'no' }, type.description) : h('p', {}, h('span', { class: 'muted' }, t('No description.'))),
    h(
      'p',
      { class: 'actions' },
      copyableId(type.name, 'event type'),
      ctx.can('endpoints') &&
        h('a', { href: `#/endpoints?new=${encodeURIComponent(type.name)}`, 'data-test': 'subscribe', 'data-mutating': true }, t('Subscribe an endpoint to this')),
    ),
    fieldsTable(type),
    jsonBlock(t('JSON Schema of the payload'), type.schema, t('No schema: any payload is accepted.')),
    jsonBlock(t('Example payload'), type.example, t('No example.')),
  );
}

/** The schema's top-level properties as a readable table (none: nothing). */
function fieldsTable(type) {
  const properties = type.schema?.properties;
  if (!properties || typeof properties !== 'object') return null;
  const required = new Set(Array.isArray(type.schema.required) ? type.schema.required : []);
  // JSON Schema's type names ("integer", "string") are the schema's own (code, not translated); the words between them are the portal's.
  const name = (text) => h('code', {}, text);
  const typeOf = (schema) => {
    if (Array.isArray(schema?.enum)) return tx('one of {values}', { values: name(schema.enum.map((v) => JSON.stringify(v)).join(', ')) });
    const names = Array.isArray(schema?.type) ? schema.type : schema?.type ? [schema.type] : [];
    const parts = names.length ? names.flatMap((n, i) => (i ? [t(' or '), name(n)] : [name(n)])) : [t('any')];
    return schema?.format ? [...parts, ' (', name(schema.format), ')'] : parts;
  };
  return h(
    'table',
    { class: 'data fields', 'data-test': 'event-fields' },
    h('caption', {}, t('Fields of {name}', { name: type.name })),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, t('Field')),
        h('th', { scope: 'col' }, t('Type')),
        h('th', { scope: 'col' }, t('Required')),
        h('th', { scope: 'col' }, t('Description')),
      ),
    ),
    h(
      'tbody',
      {},
      Object.entries(properties).map(([name, schema]) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, h('code', {}, name)),
          // The schema's type names are its own (code), and so are its words (the provider's).
          h('td', {}, typeOf(schema)),
          h('td', {}, required.has(name) ? t('yes') : t('no')),
          h('td', { translate: 'no' }, schema?.description ?? ''),
        ),
      ),
    ),
  );
}

function jsonBlock(title, value, none) {
  const present = value !== null && value !== undefined;
  return h(
    'details',
    {},
    h('summary', {}, title),
    present ? h('pre', { class: 'code', tabindex: '0' }, prettyJson(value)) : h('p', { class: 'muted' }, none),
  );
}
