// screens/endpoint-transform.js — the endpoint form's transform: none, a
// chat preset (Slack, Microsoft Teams, Discord) or a jq program, with a live
// preview of what it makes of an event — the app's latest, or a catalog
// type's example — through POST …/transform-preview (which saves nothing).
// The server compiles and checks the program; the form shows what it says.
// Words through i18n.js; the program's placeholder is an example, left as it is.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { t } from '../i18n.js';
import { clearProblem, field, problemSlot, select, showProblem, tieProblem, untieProblem } from '../ui.js';

const PRESETS = ['slack', 'teams', 'discord'];
/** How long typing pauses before the preview runs again. */
const SETTLE_MS = 500;

/**
 * `endpoint`: the EndpointView being changed, or null when creating;
 * `catalog`: the event types (those with an example can be previewed on).
 * Returns `{ section, value(), control }`: `value()` is the body's
 * `transform` (null for none), `control` what a refusal is tied to.
 */
export function transformField(endpoint, catalog) {
  const current = endpoint?.transform ?? null;
  const kind = select(
    { id: 'endpoint-transform-kind', 'data-test': 'transform-kind' },
    [
      ['none', t('None: the event as published')],
      ['slack', 'Slack'],
      ['teams', 'Microsoft Teams'],
      ['discord', 'Discord'],
      ['program', t('A jq program')],
    ],
    current === null ? 'none' : PRESETS.includes(current) ? current : 'program',
  );
  const program = h('textarea', {
    id: 'endpoint-transform',
    'data-test': 'transform-program',
    class: 'code',
    rows: 5,
    maxlength: 16384,
    spellcheck: 'false',
    autocomplete: 'off',
    translate: 'no',
    dir: 'ltr',
    placeholder: '{text: "Order \\(.payload.id) was paid", amount: .payload.amount}',
  });
  program.value = current !== null && !PRESETS.includes(current) ? current : '';
  const programField = field(
    t('Program'),
    program,
    t('Given {input}; gives the body to send, or {full}, or {null} to skip the event.', {
      input: '{event_type, event_id, seq, timestamp, payload, endpoint}',
      full: '{body, headers, url}',
      null: 'null',
    }),
  );

  const examples = catalog.filter((type) => type.example != null);
  const source = select(
    { id: 'endpoint-transform-source', 'data-test': 'transform-source' },
    [['latest', t('Your latest event')], ...examples.map((type) => [type.name, t('The example of {type}', { type: type.name })])],
    'latest',
  );
  const result = h('div', { class: 'transform-preview', 'data-test': 'transform-preview', role: 'status', 'aria-live': 'polite' });
  const problem = problemSlot();

  const value = () => {
    if (kind.value === 'none') return null;
    if (kind.value === 'program') return program.value.trim() === '' ? null : program.value;
    return kind.value;
  };

  let timer = null;
  let asked = 0;
  const preview = async () => {
    clearProblem(problem);
    untieProblem(program, problem);
    const transform = value();
    if (transform === null) {
      replace(result);
      return;
    }
    const body = { transform };
    if (endpoint) body.endpoint_id = endpoint.id;
    if (source.value !== 'latest') body.event_type = source.value;
    const mine = ++asked;
    try {
      const answer = await api.transformPreview(body);
      if (mine === asked) replace(result, ...shown(answer));
    } catch (error) {
      if (mine !== asked) return;
      replace(result);
      showProblem(problem, error);
      if (error?.code === 'invalid_transform') tieProblem(program, problem);
    }
  };
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(preview, SETTLE_MS);
  };
  const showKind = () => {
    programField.hidden = kind.value !== 'program';
    previewRow.hidden = kind.value === 'none';
  };
  const run = h('button', { type: 'button', 'data-test': 'transform-preview-run' }, t('Preview'));
  run.addEventListener('click', preview);
  const previewRow = h('div', { class: 'field' }, field(t('Preview on'), source), h('div', { class: 'actions' }, run), problem, result);
  kind.addEventListener('change', () => {
    showKind();
    soon();
  });
  program.addEventListener('input', soon);
  source.addEventListener('change', soon);
  showKind();

  const section = h(
    'fieldset',
    { class: 'transform', 'data-test': 'transform' },
    h('legend', {}, t('Transform (optional)')),
    h('p', { class: 'hint' }, t('What your endpoint is sent instead of the event as published: a chat format, or a program of your own. What is sent is what is signed.')),
    field(t('Send'), kind),
    programField,
    previewRow,
  );
  return { section, value, control: program };
}

/** The preview's answer: what would be sent, or that nothing would, or why it fails. */
function shown(answer) {
  const about = h('p', { class: 'muted' }, t('On {type}', { type: answer.event_type }), answer.event_id ? ` (${answer.event_id})` : '');
  if (answer.outcome === 'skip') {
    return [about, h('p', { 'data-test': 'transform-outcome', 'data-outcome': 'skip' }, t('Skipped: nothing would be sent for this event.'))];
  }
  if (answer.outcome === 'error') {
    return [
      about,
      h('p', { 'data-test': 'transform-outcome', 'data-outcome': 'error', class: 'problem' }, t('It fails, so the delivery would be dead: {error}', { error: answer.error })),
    ];
  }
  const headers = Object.entries(answer.headers ?? {});
  return [
    about,
    h('p', { 'data-test': 'transform-outcome', 'data-outcome': 'send' }, answer.url ? t('Would be sent to {url}:', { url: answer.url }) : t('Would be sent:')),
    headers.length ? h('pre', { class: 'code', dir: 'ltr' }, headers.map(([name, v]) => `${name}: ${v}`).join('\n')) : null,
    h('pre', { class: 'code', dir: 'ltr', 'data-test': 'transform-body', translate: 'no' }, pretty(answer.body)),
  ];
}

/** A body's JSON text, indented. */
function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
