// screens/catalog.js — `#/catalog`: the event types the provider publishes,
// with each one's description, JSON Schema and example payload.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { prettyJson } from '../format.js';
import { empty, loading } from '../ui.js';

export async function catalogScreen(ctx) {
  ctx.title('Event catalog');
  const list = h('div', {}, loading('Loading the event catalog…'));
  ctx.root.append(
    h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, 'Event catalog')),
    h('p', { class: 'lead' }, 'The event types your endpoints can receive, what each means and what its payload looks like.'),
    list,
  );
  const types = await api.listEventTypes({ fresh: true });
  replace(list, types.length ? types.map(eventType) : empty('The catalog is empty: no event types are described yet.'));
}

function eventType(t) {
  const headingId = `type-${t.name.replace(/[^A-Za-z0-9_-]/g, '-')}`;
  return h(
    'section',
    { class: 'event-type', 'data-test': 'event-type', 'data-name': t.name, 'aria-labelledby': headingId },
    h('h2', { id: headingId }, h('code', {}, t.name), t.deprecated && h('span', { class: 'badge badge-deprecated' }, 'Deprecated')),
    h('p', {}, t.description || h('span', { class: 'muted' }, 'No description.')),
    jsonBlock('JSON Schema of the payload', t.schema, 'No schema: any payload is accepted.'),
    jsonBlock('Example payload', t.example, 'No example.'),
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
