// ui.js — the small pieces every screen uses: problem alerts, the confirmation
// dialog, announcements, form fields, badges, times, loading and empty states,
// and the full-page messages (sign-in failed, session over, not found).
// Their own words are in the reader's language (i18n.js); what callers pass
// (labels, titles, messages) comes translated.

import { h, replace, uid } from './dom.js';
import { dateTime, relativeTime } from './format.js';
import { msg, t } from './i18n.js';
import { deliveryStateLabel, shownState } from './words.js';

// --- problems ----------------------------------------------------------------

/** A place, next to an action, where that action's failure is shown. */
export function problemSlot() {
  return h('div', { class: 'problem-slot' });
}

/**
 * Shows what went wrong in `slot` (`role="alert"`, so it is announced). An
 * abandoned request (the screen was left) shows nothing, and neither does the
 * 401 that ended the session: the session-ended page says it.
 */
export function showProblem(slot, error) {
  if (error?.name === 'AbortError' || error?.sessionEnded) return;
  if (error?.name !== 'Problem') console.error(error);
  const text = error?.name === 'Problem' ? error.message : t('Something went wrong. Reload the page and try again.');
  replace(slot, h('p', { class: 'problem', role: 'alert', 'data-test': 'problem' }, text));
}

export function clearProblem(slot) {
  slot.replaceChildren();
}

/**
 * Ties a problem shown in `slot` to the control it is about: `aria-invalid`,
 * and the problem added to what describes it (so a screen reader on the
 * field hears why); `untieProblem` undoes it.
 */
export function tieProblem(control, slot) {
  if (!slot.id) slot.id = uid('problem');
  control.setAttribute('aria-invalid', 'true');
  const described = (control.getAttribute('aria-describedby') ?? '').split(' ').filter(Boolean);
  if (!described.includes(slot.id)) control.setAttribute('aria-describedby', [...described, slot.id].join(' '));
  control.focus();
}

export function untieProblem(control, slot) {
  control.removeAttribute('aria-invalid');
  const described = (control.getAttribute('aria-describedby') ?? '').split(' ').filter((id) => id && id !== slot.id);
  if (described.length) control.setAttribute('aria-describedby', described.join(' '));
  else control.removeAttribute('aria-describedby');
}

// --- announcements --------------------------------------------------------------

/** Says `text` to screen readers through the page's polite live region. */
export function announce(text) {
  const region = document.getElementById('announcer');
  if (!region) return;
  // Emptied first so the same message twice is announced twice.
  region.textContent = '';
  setTimeout(() => {
    region.textContent = text;
  }, 50);
}

// --- confirmation ---------------------------------------------------------------

/**
 * Asks before an action that cannot be undone: a modal <dialog> that takes
 * focus (on "Cancel", the safe choice) and gives it back when it closes.
 * Resolves to true for yes. The dialog exists only while it is open.
 */
export function confirmAction({ title, message, yes = t('Confirm'), no = t('Cancel') }) {
  const titleId = uid('confirm-title');
  const messageId = uid('confirm-message');
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const yesButton = h('button', { type: 'button', class: 'danger', 'data-test': 'confirm-yes', 'data-mutating': true }, yes);
    const noButton = h('button', { type: 'button', 'data-test': 'confirm-no' }, no);
    const dialog = h(
      'dialog',
      { class: 'confirm', 'data-test': 'confirm', 'aria-labelledby': titleId, 'aria-describedby': messageId },
      h('h2', { id: titleId }, title),
      h('p', { id: messageId }, message),
      h('div', { class: 'actions' }, noButton, yesButton),
    );
    const finish = (answer) => {
      dialog.close();
      dialog.remove();
      if (opener?.isConnected) opener.focus();
      resolve(answer);
    };
    yesButton.addEventListener('click', () => finish(true));
    noButton.addEventListener('click', () => finish(false));
    // Escape closes a modal dialog: that is a "no".
    dialog.addEventListener('cancel', (event) => {
      event.preventDefault();
      finish(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    noButton.focus();
  });
}

// --- forms ------------------------------------------------------------------------

/**
 * A labelled control: `<label for>` + the control + an optional hint that the
 * control names as its description.
 */
export function field(label, control, hint = null) {
  if (!control.id) control.id = uid('field');
  const parts = [h('label', { for: control.id }, label), control];
  if (hint) {
    const hintId = `${control.id}-hint`;
    control.setAttribute('aria-describedby', hintId);
    parts.push(h('p', { class: 'hint', id: hintId }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

/** A <select> from `[value, label]` pairs, with `selected` chosen. */
export function select(attrs, options, selected = '') {
  return h(
    'select',
    attrs,
    options.map(([value, label]) => h('option', { value, selected: value === selected }, label)),
  );
}

/**
 * Runs an action started by `button`, disabled meanwhile so it is not sent
 * twice. Resolves to the action's result.
 */
export async function whileBusy(button, action) {
  // Disabling a focused button drops focus to <body>; it is given back after.
  const hadFocus = document.activeElement === button;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try {
    return await action();
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    if (hadFocus && button.isConnected && document.activeElement === document.body) button.focus();
  }
}

// --- small displays ------------------------------------------------------------------

/** A delivery's state as a coloured badge (colour is never the only cue: the text says it). */
export function stateBadge(delivery) {
  return h('span', { class: `badge badge-${shownState(delivery)}` }, deliveryStateLabel(delivery));
}

/** A status badge of an endpoint (`enabled`, `paused`, `disabled`). */
export function statusBadge(key, text) {
  return h('span', { class: `badge badge-${key}` }, text);
}

/** A time in the reader's locale, with a relative hint: "1 Dec 2026, 09:30 (3 min ago)". */
export function timeEl(value, now = new Date()) {
  if (!value) return h('span', { class: 'muted' }, '—');
  return h(
    'time',
    // All of it is a time, formatted by Intl in the portal's language; the
    // title is the exact UTC time.
    { datetime: value, title: value, translate: 'no' },
    dateTime(value),
    h('span', { class: 'relative' }, ` (${relativeTime(value, now)})`),
  );
}

/**
 * A short time for a dense list: "3 minutes ago". The exact time is its
 * `title` (on hover) and, for screen readers, read after it (visually hidden).
 */
export function shortTimeEl(value, now = new Date()) {
  if (!value) return h('span', { class: 'muted' }, '—');
  const exact = dateTime(value);
  return h(
    'time',
    { datetime: value, title: exact, class: 'short-time' },
    relativeTime(value, now),
    h('span', { class: 'visually-hidden' }, `, ${exact}`),
  );
}

/** A definition list from `[term, value]` pairs; pairs with a null value are left out. */
export function facts(pairs, attrs = {}) {
  return h(
    'dl',
    { class: 'facts', ...attrs },
    pairs.filter(([, value]) => value !== null && value !== undefined).map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]),
  );
}

export function loading(text = t('Loading…')) {
  return h('p', { class: 'loading', role: 'status' }, text);
}

export function empty(text) {
  return h('p', { class: 'empty' }, text);
}

/** Visually hidden text: names a control for screen readers ("Edit" → "Edit https://…"). */
export function hidden(text) {
  return h('span', { class: 'visually-hidden' }, text);
}

// --- full-page messages ------------------------------------------------------------------

/**
 * A page that replaces the portal when it cannot go on: a heading that says
 * what happened, the server's detail, and what to do.
 */
export function errorPage({ heading, detail, advice }) {
  return h(
    'section',
    { class: 'error-page', 'data-test': 'error-page', 'aria-labelledby': 'error-heading' },
    h('h1', { id: 'error-heading', tabindex: '-1' }, heading),
    detail && h('p', { class: 'error-detail' }, detail),
    advice && h('p', {}, advice),
  );
}

/** What a 404 says, by what was not found (`notFound`'s `what`). */
const NOT_FOUND_TEXTS = {
  page: msg('This page does not exist, or it is not part of this app.'),
};

/** The answer to a 404: an id that does not exist (or belongs to another app). */
export function notFound(what = 'page') {
  const text = Object.hasOwn(NOT_FOUND_TEXTS, what)
    ? t(NOT_FOUND_TEXTS[what])
    : t('This {what} does not exist, or it is not part of this app.', { what });
  return h(
    'section',
    { class: 'not-found', 'data-test': 'not-found', 'aria-labelledby': 'not-found-heading' },
    h('h1', { id: 'not-found-heading', tabindex: '-1' }, t('Not found')),
    h('p', {}, text),
    h('p', {}, h('a', { href: '#/endpoints' }, t('Go to your endpoints'))),
  );
}

// --- clipboard ---------------------------------------------------------------------------

/** The copy button's name, by what the id is of (`copyableId`'s `what`). */
const COPY_LABELS = {
  delivery: msg('Copy the delivery id'),
  event: msg('Copy the event id'),
  endpoint: msg('Copy the endpoint id'),
  'event type': msg('Copy the event type id'),
};

/**
 * Copies `text`. The Clipboard API first; where it is refused (no permission,
 * an insecure context) the older select-and-copy. Resolves to success.
 */
/**
 * An id with a button that copies it: `<code>` (never broken mid-token) and
 * "Copy", whose outcome is said beside it (`what`: "delivery", "event"…).
 */
export function copyableId(id, what) {
  const value = h('code', { class: 'id' }, id);
  const said = h('span', { class: 'copied', role: 'status', 'data-test': 'id-copied', 'data-copy': id });
  const label = Object.hasOwn(COPY_LABELS, what) ? t(COPY_LABELS[what]) : t('Copy the {what} id', { what });
  const button = h('button', { type: 'button', class: 'copy-id', 'data-test': 'copy-id', 'data-copy': id, 'aria-label': label }, t('Copy'));
  button.addEventListener('click', async () => {
    said.textContent = (await copyText(id, value)) ? t('Copied') : t('Could not copy: select the id and copy it by hand.');
  });
  return h('span', { class: 'copyable' }, value, ' ', button, ' ', said);
}

/**
 * Gives a responsive table's parts (`node`, or a row added later) their
 * roles explicitly: on a phone they are drawn as cards (CSS `display: block`
 * and `grid`), which makes browsers drop the table semantics they infer, and
 * screen readers would read loose text. Returns `node`.
 */
export function withTableRoles(node) {
  const roles = { TABLE: 'table', THEAD: 'rowgroup', TBODY: 'rowgroup', TR: 'row', TD: 'cell' };
  for (const el of [node, ...node.querySelectorAll('thead, tbody, tr, th, td')]) {
    const role = el.tagName === 'TH' ? (el.getAttribute('scope') === 'row' ? 'rowheader' : 'columnheader') : roles[el.tagName];
    if (role) el.setAttribute('role', role);
  }
  return node;
}

export async function copyText(text, source) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try {
      return document.execCommand('copy');
    } catch {
      return false;
    }
  }
}
