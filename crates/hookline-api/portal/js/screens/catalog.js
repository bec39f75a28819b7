// screens/catalog.js — `#/catalog`: the event types the provider publishes,
// grouped by their first name segment (`invoice.*`), searchable, each with
// its description, its payload's fields as a table (from its JSON Schema),
// the schema and an example, a copy button for its name, and (with
// `endpoints`) "Subscribe an endpoint", which opens the endpoint form with
// the type picked.

import * as api from '../api.js';
import { h, replace, uid } from '../dom.js';
import { prettyJson } from '../format.js';
import { copyableId, empty, field, loading } from '../ui.js';

export async function catalogScreen(ctx) {
  ctx.title('Event catalog');
  const list = h('div', {}, loading('Loading the event catalog…'));
  const search = h('input', { id: 'catalog-search', type: 'search', autocomplete: 'off', 'data-test': 'catalog-search', placeholder: 'invoice, paid…' });
  const found = h('p', { class: 'muted', role: 'status', 'data-test': 'catalog-found' });
  ctx.root.append(
    h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, 'Event catalog')),
    h('p', { class: 'lead' }, 'The event types your endpoints can receive, what each means and what its payload looks like.'),
    list,
  );
  const types = await api.listEventTypes({ fresh: true });
  if (!types.length) {
    replace(list, empty('The catalog is empty: no event types are described yet.'));
    return;
  }
  const groups = groupByPrefix(types);
  const sections = groups.map(([prefix, members]) => group(ctx, prefix, members));
  replace(list, field('Search the catalog', search), found, sections);
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
    found.textContent = words ? `${shown} of ${types.length} event types match.` : '';
  });
}

/** `[[prefix, types]]` by the name's first segment, in name order. */
function groupByPrefix(types) {
  const groups = new Map();
  for (const t of [...types].sort((a, b) => a.name.localeCompare(b.name))) {
    // A name without a dot is in no group: "Other".
    const prefix = t.name.includes('.') ? t.name.split('.')[0] : '';
    if (!groups.has(prefix)) groups.set(prefix, []);
    groups.get(prefix).push(t);
  }
  return [...groups.entries()];
}

function group(ctx, prefix, members) {
  const id = uid('group');
  return h(
    'section',
    { class: 'event-group', 'data-test': 'event-group', 'data-prefix': prefix, 'aria-labelledby': id },
    h('h2', { id }, prefix ? h('code', {}, `${prefix}.*`) : 'Other', h('span', { class: 'muted' }, ` · ${members.length} ${members.length === 1 ? 'type' : 'types'}`)),
    members.map((t) => eventType(ctx, t)),
  );
}

function eventType(ctx, t) {
  const headingId = uid('type');
  return h(
    'article',
    {
      class: 'event-type',
      'data-test': 'event-type',
      'data-name': t.name,
      'data-search': `${t.name} ${t.description ?? ''}`.toLowerCase(),
      'aria-labelledby': headingId,
    },
    h('h3', { id: headingId }, h('code', {}, t.name), t.deprecated && h('span', { class: 'badge badge-deprecated' }, 'Deprecated')),
    h('p', {}, t.description || h('span', { class: 'muted' }, 'No description.')),
    h(
      'p',
      { class: 'actions' },
      copyableId(t.name, 'event type'),
      ctx.can('endpoints') &&
        h('a', { href: `#/endpoints?new=${encodeURIComponent(t.name)}`, 'data-test': 'subscribe', 'data-mutating': true }, 'Subscribe an endpoint to this'),
    ),
    fieldsTable(t),
    jsonBlock('JSON Schema of the payload', t.schema, 'No schema: any payload is accepted.'),
    jsonBlock('Example payload', t.example, 'No example.'),
  );
}

/** The schema's top-level properties as a readable table (none: nothing). */
function fieldsTable(t) {
  const properties = t.schema?.properties;
  if (!properties || typeof properties !== 'object') return null;
  const required = new Set(Array.isArray(t.schema.required) ? t.schema.required : []);
  const typeOf = (schema) => {
    if (Array.isArray(schema?.enum)) return `one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`;
    const type = Array.isArray(schema?.type) ? schema.type.join(' or ') : schema?.type;
    return [type ?? 'any', schema?.format && `(${schema.format})`].filter(Boolean).join(' ');
  };
  return h(
    'table',
    { class: 'data fields', 'data-test': 'event-fields' },
    h('caption', {}, `Fields of ${t.name}`),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Type'), h('th', { scope: 'col' }, 'Required'), h('th', { scope: 'col' }, 'Description'))),
    h(
      'tbody',
      {},
      Object.entries(properties).map(([name, schema]) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, h('code', {}, name)),
          h('td', {}, typeOf(schema)),
          h('td', {}, required.has(name) ? 'yes' : 'no'),
          h('td', {}, schema?.description ?? ''),
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
