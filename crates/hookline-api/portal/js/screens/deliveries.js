// screens/deliveries.js — `#/deliveries`: the delivery log, and the log
// component the endpoint page embeds (filtered to its endpoint).
//
// Filters live in the hash query (`#/deliveries?state=dead&endpoint_id=…`),
// so a filtered view can be bookmarked and shared. Paging is by the API's
// cursor: "Older" follows `next_cursor`, "Newest" returns to the first page.
// On the first page, while the tab is visible, the log polls every 3 s and
// merges new and changed rows in place: rows that did not change keep their
// DOM nodes, so focus and scroll stay where the reader left them. "Pause live
// updates" stops the polling (WCAG 2.2.2) until it is pressed again; new rows
// are announced to screen readers at most once every 30 s, counted together.
// Its words are in the reader's language (i18n.js).

import * as api from '../api.js';
import { h, keepingFocus, replace } from '../dom.js';
import { dateTime, localInputToRfc3339, relativeTime, rfc3339ToLocalInput } from '../format.js';
import { msg, t, tn } from '../i18n.js';
import { hashFor } from '../router.js';
import {
  announce,
  clearProblem,
  confirmAction,
  empty,
  field,
  loading,
  problemSlot,
  select,
  shortTimeEl,
  showProblem,
  stateBadge,
  whileBusy,
  withTableRoles,
} from '../ui.js';
import { DEAD_REASONS } from '../words.js';

const PAGE_SIZE = 50;
const POLL_MS = 3000;
/** At most one "N new deliveries" announcement in this long. */
const ANNOUNCE_MS = 30_000;

/** `state=` values the API takes (StateParam in routes/deliveries.rs), in the reader's words. */
const STATE_OPTIONS = [
  ['', msg('All states')],
  ['succeeded', msg('Succeeded')],
  ['dead', msg('Failed (dead)')],
  ['pending', msg('Pending (waiting or retrying)')],
  ['in_flight', msg('Sending now')],
  ['blocked', msg('Blocked (behind an earlier event)')],
  ['parked', msg('Parked (endpoint paused or disabled)')],
];

/** Time presets: how far back `since` goes, computed when the list is read. */
const RANGES = {
  '1h': 3_600_000,
  '24h': 86_400_000,
  '7d': 7 * 86_400_000,
};
const RANGE_OPTIONS = [
  ['', msg('Any time')],
  ['1h', msg('Last hour')],
  ['24h', msg('Last 24 hours')],
  ['7d', msg('Last 7 days')],
  ['custom', msg('Custom range')],
];

/** The filters a log understands, as they appear in the hash query. */
const FILTERS = ['state', 'event_type', 'endpoint_id', 'status', 'range', 'since', 'until', 'event_id'];

export async function deliveriesScreen(ctx) {
  ctx.title(t('Deliveries'));
  ctx.root.append(
    h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, t('Deliveries'))),
    h('p', { class: 'lead' }, t('Every event sent to your endpoints, newest first. New deliveries appear as they happen.')),
    deliveryLog(ctx, { filters: filtersFrom(ctx.query), syncUrl: true }),
  );
}

/** The filters in a hash query. */
export function filtersFrom(query) {
  return Object.fromEntries(FILTERS.map((name) => [name, query.get(name) ?? '']));
}

/** The API query for `filters` at `now` (a preset range becomes `since`). */
function apiQuery(filters, now) {
  const query = {
    state: filters.state,
    event_type: filters.event_type,
    endpoint_id: filters.endpoint_id,
    status: filters.status,
    event_id: filters.event_id,
  };
  if (RANGES[filters.range]) query.since = new Date(now - RANGES[filters.range]).toISOString();
  if (filters.range === 'custom') {
    query.since = filters.since;
    query.until = filters.until;
  }
  return query;
}

/**
 * The delivery log. `filters`: the initial filters; `endpointId`: a fixed
 * endpoint (the endpoint page), whose selector is then left out; `syncUrl`:
 * write applied filters into the address (the deliveries screen only).
 */
export function deliveryLog(ctx, { filters, endpointId = null, syncUrl = false }) {
  let current = { ...filters, endpoint_id: endpointId ?? filters.endpoint_id };
  let cursor = null; // null: the first page (the only one that polls)
  let busy = false;
  // Bumped by every new filter or page: an answer to an older request is dropped.
  let generation = 0;
  let rows = new Map(); // delivery id → { signature, el }
  let endpointUrls = new Map();
  let paused = false;
  // New rows not announced yet, and when the last announcement was made.
  let unannounced = 0;
  let announcedAt = -Infinity;

  const problem = problemSlot();
  const results = h('div', { class: 'log-results' }, loading(t('Loading deliveries…')));
  const pager = h('nav', { class: 'pager', 'aria-label': t('Delivery pages') });
  const form = filterForm();
  const liveNote = h('span', { class: 'muted', role: 'status' });
  const liveToggle = h(
    'button',
    { type: 'button', 'aria-pressed': 'false', 'data-test': 'live-toggle', onclick: toggleLive },
    t('Pause live updates'),
  );
  // Dead deliveries replayed from the log, one (its row's button) or those
  // ticked (the toolbar's): only for a session that may replay.
  const canReplay = ctx.can('replay');
  const chosen = new Set(); // ids of ticked dead rows on this page
  const replayNote = h('span', { class: 'muted', role: 'status', tabindex: '-1', 'data-test': 'replay-note' });
  const replayChosen =
    canReplay &&
    h('button', { type: 'button', 'data-test': 'replay-selected', 'data-mutating': true, disabled: true, onclick: () => replay([...chosen], replayChosen) }, t('Replay selected'));
  const live = h('div', { class: 'live-control' }, liveToggle, ' ', liveNote, canReplay && [' ', replayChosen, ' ', replayNote]);
  // `data-ticks`: the polling timer's ticks, paused or not (tests wait on it).
  const root = h('div', { class: 'delivery-log', 'data-ticks': '0' }, form.el, live, problem, results, pager);

  start();
  return root;

  async function start() {
    // Endpoint URLs label the rows and fill the selector; the log still works without them.
    const [urls] = await Promise.allSettled([
      api.allEndpoints({ signal: ctx.signal }).then((list) => {
        endpointUrls = new Map(list.map((e) => [e.id, e.url]));
        form.setEndpoints(list);
      }),
      api.listEventTypes().then((types) => form.setEventTypes(types)),
    ]);
    if (urls.status === 'rejected' && urls.reason?.sessionEnded) return;
    await load();
    ctx.every(POLL_MS, tick);
  }

  /** Reads the current page and draws it. */
  async function load() {
    const mine = ++generation;
    unannounced = 0;
    busy = true;
    try {
      const page = await api.listDeliveries(
        { ...apiQuery(current, Date.now()), limit: PAGE_SIZE, before: cursor ?? undefined },
        { signal: ctx.signal },
      );
      if (mine !== generation) return;
      clearProblem(problem);
      draw(page);
    } catch (error) {
      if (mine !== generation) return;
      results.replaceChildren();
      pager.replaceChildren();
      forgetChosen();
      showProblem(problem, error);
    } finally {
      if (mine === generation) busy = false;
    }
  }

  /** Says how many rows are ticked, on the toolbar's button. */
  function showChosen() {
    if (!replayChosen) return;
    replayChosen.disabled = chosen.size === 0;
    replayChosen.textContent = chosen.size ? t('Replay selected ({count})', { count: chosen.size }) : t('Replay selected');
    for (const box of results.querySelectorAll('[data-test=delivery-select]')) {
      box.checked = chosen.has(box.closest('tr').dataset.id);
    }
  }

  /** Forgets every ticked row (nothing of them is on screen any more). */
  function forgetChosen() {
    chosen.clear();
    showChosen();
  }

  /** Replays `ids` (dead deliveries) after a confirmation, one request each, and reads the page again. */
  async function replay(ids, button) {
    if (ids.length === 0) return;
    const confirmed = await confirmAction({
      title: tn(ids.length, 'Replay this delivery?', 'Replay {n} deliveries?'),
      message: t('Each event is sent to its endpoint again, now, with the same {header}, in a new round of attempts.', {
        header: 'webhook-id',
      }),
      yes: t('Replay'),
    });
    if (!confirmed) return;
    clearProblem(problem);
    let replayed = 0;
    let failure = null;
    await whileBusy(button, async () => {
      for (const id of ids) {
        try {
          const answer = await api.replayDelivery(id);
          if (answer?.replayed) replayed += 1;
        } catch (error) {
          if (error.sessionEnded) return;
          failure ??= error;
        }
      }
    });
    // Emptied first, so the same words twice are announced twice.
    replayNote.textContent = '';
    setTimeout(() => {
      replayNote.textContent = t('Replayed {replayed} of {total}.', { replayed, total: ids.length });
    }, 50);
    for (const id of ids) chosen.delete(id);
    await load();
    if (failure) showProblem(problem, failure);
    // The replayed rows may be gone from this view: the outcome holds the focus.
    replayNote.focus();
  }

  /** Pauses or resumes live updates; resuming reads the first page at once. */
  function toggleLive() {
    paused = !paused;
    liveToggle.setAttribute('aria-pressed', String(paused));
    liveNote.textContent = paused ? t('Live updates paused.') : '';
    if (!paused) poll();
  }

  function tick() {
    root.dataset.ticks = String(Number(root.dataset.ticks) + 1);
    poll();
  }

  /** The first page again, if it is showing, live and someone can see it. */
  async function poll() {
    if (paused || cursor !== null || busy || document.visibilityState !== 'visible') return;
    const mine = generation;
    busy = true;
    try {
      const page = await api.listDeliveries({ ...apiQuery(current, Date.now()), limit: PAGE_SIZE }, { signal: ctx.signal });
      if (mine !== generation) return; // new filters or another page meanwhile
      const before = rows.size;
      const fresh = page.data.filter((d) => !rows.has(d.id)).length;
      clearProblem(problem);
      draw(page);
      if (before > 0) unannounced += fresh;
      if (unannounced > 0 && Date.now() - announcedAt >= ANNOUNCE_MS) {
        announce(tn(unannounced, '1 new delivery', '{n} new deliveries'));
        unannounced = 0;
        announcedAt = Date.now();
      }
    } catch (error) {
      if (mine === generation) showProblem(problem, error);
    } finally {
      if (mine === generation) busy = false;
    }
  }

  function draw(page) {
    drawPager(page.next_cursor);
    if (page.data.length === 0) {
      rows = new Map();
      forgetChosen();
      const filtered = FILTERS.some((name) => name !== 'endpoint_id' && current[name]);
      replace(results, empty(filtered ? t('No deliveries match these filters.') : t('No deliveries yet.')));
      return;
    }
    let tbody = results.querySelector('tbody');
    if (!tbody) {
      tbody = h('tbody');
      replace(results, table(tbody));
      rows = new Map();
    }
    merge(tbody, page.data);
  }

  /**
   * Puts `deliveries` into `tbody` in order, reusing the node of every row
   * whose data did not change; a focused row that changed hands focus to
   * its replacement.
   */
  function merge(tbody, deliveries) {
    const focusedRow = document.activeElement?.closest?.('tr[data-id]');
    const focusedId = tbody.contains(focusedRow) ? focusedRow.dataset.id : null;
    // The minute is part of a row's signature, so its relative times ("3 minutes ago") stay true.
    const minute = Math.floor(Date.now() / 60_000);
    const wanted = deliveries.map((d) => {
      const signature = `${minute} ${JSON.stringify(d)}`;
      const old = rows.get(d.id);
      return old && old.signature === signature ? old : { signature, el: deliveryRow(d) };
    });
    keepingFocus(
      () => focusedId && tbody.querySelector(`tr[data-id="${CSS.escape(focusedId)}"] a`),
      () => {
        const keep = new Set(wanted.map((w) => w.el));
        for (const el of [...tbody.children]) if (!keep.has(el)) el.remove();
        let next = tbody.firstElementChild;
        for (const w of wanted) {
          if (w.el === next) next = next.nextElementSibling;
          else tbody.insertBefore(w.el, next);
        }
      },
    );
    rows = new Map(deliveries.map((d, i) => [d.id, wanted[i]]));
    const dead = new Set(deliveries.filter((d) => d.state === 'dead').map((d) => d.id));
    for (const id of chosen) if (!dead.has(id)) chosen.delete(id);
    showChosen();
  }

  function table(tbody) {
    const columns = [
      t('Time'),
      t('Event'),
      !endpointId && t('Endpoint'),
      t('State'),
      t('Attempts'),
      t('Last attempt'),
      t('Next attempt'),
      canReplay && t('Replay'),
    ].filter(Boolean);
    return withTableRoles(
      h(
        'table',
        { class: 'data responsive deliveries' },
        h('caption', { class: 'visually-hidden' }, t('Deliveries, newest first')),
        h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
        tbody,
      ),
    );
  }

  function deliveryRow(d) {
    return withTableRoles(row(d));
  }

  function row(d) {
    const now = new Date();
    return h(
      'tr',
      { 'data-test': 'delivery-row', 'data-id': d.id, 'data-state': d.state },
      h('th', { scope: 'row', 'data-label': t('Time') }, h('a', { href: `#/deliveries/${encodeURIComponent(d.id)}` }, shortTimeEl(d.created_at, now))),
      h('td', { 'data-label': t('Event') }, h('code', { class: 'type-name', 'data-test': 'delivery-event-type' }, d.event_type), h('code', { class: 'id sub muted' }, d.event_id)),
      !endpointId &&
        h(
          'td',
          { 'data-label': t('Endpoint') },
          h(
            'a',
            { href: `#/endpoints/${encodeURIComponent(d.endpoint_id)}`, class: 'url', translate: 'no' },
            endpointUrls.get(d.endpoint_id) ?? d.endpoint_id,
          ),
        ),
      h(
        'td',
        { 'data-label': t('State') },
        stateBadge(d),
        d.dead_reason && h('span', { class: 'sub muted' }, t(DEAD_REASONS[d.dead_reason] ?? d.dead_reason)),
      ),
      h('td', { 'data-label': t('Attempts') }, String(d.attempts)),
      h('td', { 'data-label': t('Last attempt') }, d.last_attempt_at ? [lastStatus(d), shortTimeEl(d.last_attempt_at, now)] : h('span', { class: 'muted' }, '—')),
      h('td', { 'data-label': t('Next attempt') }, nextAttempt(d, now)),
      canReplay && h('td', { 'data-label': t('Replay') }, d.state === 'dead' ? replayControls(d) : h('span', { class: 'muted' }, '—')),
    );
  }

  /** A dead row's box to tick for "Replay selected", and its own Replay button. */
  function replayControls(d) {
    const what = {
      event_type: d.event_type,
      time: dateTime(d.created_at),
      endpoint: endpointUrls.get(d.endpoint_id) ?? d.endpoint_id,
    };
    const box = h('input', {
      type: 'checkbox',
      'data-test': 'delivery-select',
      'data-mutating': true,
      'aria-label': endpointId
        ? t('Select the {event_type} delivery of {time}', what)
        : t('Select the {event_type} delivery of {time} to {endpoint}', what),
      checked: chosen.has(d.id),
      onchange: () => {
        if (box.checked) chosen.add(d.id);
        else chosen.delete(d.id);
        showChosen();
      },
    });
    const label = endpointId
      ? t('Replay the {event_type} delivery of {time}', what)
      : t('Replay the {event_type} delivery of {time} to {endpoint}', what);
    const button = h('button', { type: 'button', 'data-test': 'delivery-replay-row', 'data-mutating': true, 'aria-label': label }, t('Replay'));
    button.addEventListener('click', () => replay([d.id], button));
    return h('span', { class: 'row-actions' }, box, ' ', button);
  }

  /** What the newest attempt got: its HTTP status, or "no answer" (a timeout, a refused connection). */
  function lastStatus(d) {
    return d.last_status === null
      ? h('span', { class: 'sub', 'data-test': 'last-status' }, t('no answer'))
      : h('span', { class: 'sub', 'data-test': 'last-status' }, t('HTTP {status}', { status: d.last_status }));
  }

  function nextAttempt(d, now) {
    if (d.parked) return h('span', { class: 'muted' }, t('when the endpoint takes deliveries again'));
    if (d.state === 'pending' && d.next_attempt_at) {
      return h('time', { datetime: d.next_attempt_at, title: d.next_attempt_at, translate: 'no' }, relativeTime(d.next_attempt_at, now));
    }
    return h('span', { class: 'muted' }, '—');
  }

  function drawPager(nextCursor) {
    replace(
      pager,
      h('button', { type: 'button', disabled: cursor === null, onclick: () => go(null) }, t('Newest')),
      h('button', { type: 'button', disabled: !nextCursor, onclick: () => go(nextCursor) }, t('Older')),
    );
  }

  function go(to) {
    cursor = to;
    chosen.clear();
    // A new page is drawn from scratch (no merging across pages).
    replace(results, loading(t('Loading deliveries…')));
    load();
  }

  /** Applies the form's filters: from the first page, in the address if asked. */
  function apply(filtersNow) {
    current = { ...filtersNow, endpoint_id: endpointId ?? filtersNow.endpoint_id };
    if (syncUrl) history.pushState(null, '', hashFor(['deliveries'], current));
    replace(results, loading(t('Loading deliveries…')));
    cursor = null;
    load();
  }

  // --- the filter form ---------------------------------------------------------------------

  function filterForm() {
    const words = (options) => options.map(([value, label]) => [value, t(label)]);
    const state = select({ id: 'filter-state', name: 'state' }, words(STATE_OPTIONS), current.state);
    const eventType = h('input', { id: 'filter-event-type', name: 'event_type', type: 'text', list: 'filter-event-types', value: current.event_type, spellcheck: 'false', dir: 'ltr' });
    const typeList = h('datalist', { id: 'filter-event-types' });
    const endpoint = select({ id: 'filter-endpoint', name: 'endpoint_id' }, [['', t('All endpoints')]], current.endpoint_id);
    const status = h('input', { id: 'filter-status', name: 'status', type: 'text', inputmode: 'text', size: 6, value: current.status, spellcheck: 'false', dir: 'ltr' });
    const range = select({ id: 'filter-range', name: 'range' }, words(RANGE_OPTIONS), current.range);
    const since = h('input', { id: 'filter-since', name: 'since', type: 'datetime-local', value: rfc3339ToLocalInput(current.since) });
    const until = h('input', { id: 'filter-until', name: 'until', type: 'datetime-local', value: rfc3339ToLocalInput(current.until) });
    const eventId = h('input', { id: 'filter-event-id', name: 'event_id', type: 'search', placeholder: 'msg_…', value: current.event_id, spellcheck: 'false', translate: 'no', dir: 'ltr' });
    const custom = h('div', { class: 'custom-range', hidden: current.range !== 'custom' }, field(t('From'), since), field(t('Until'), until));
    range.addEventListener('change', () => {
      custom.hidden = range.value !== 'custom';
    });

    const read = () => ({
      state: state.value,
      event_type: eventType.value.trim(),
      endpoint_id: endpoint.value,
      status: status.value.trim(),
      range: range.value,
      since: range.value === 'custom' ? localInputToRfc3339(since.value) ?? '' : '',
      until: range.value === 'custom' ? localInputToRfc3339(until.value) ?? '' : '',
      event_id: eventId.value.trim(),
    });

    const form = h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': t('Filter deliveries') },
      h(
        'div',
        { class: 'filter-grid' },
        field(t('State'), state),
        field(t('Event type'), eventType),
        typeList,
        !endpointId && field(t('Endpoint'), endpoint),
        field(t('Last HTTP status'), status, t('A status such as 503, or a class such as 5xx.')),
        field(t('Time'), range),
        field(t('Event id'), eventId),
      ),
      custom,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit', class: 'primary' }, t('Apply filters')),
        h('button', { type: 'button', onclick: clear }, t('Clear filters')),
      ),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      apply(read());
      showActive();
    });

    // The filters fold away: open on a wide screen or when some are set,
    // folded on a phone, so the log is on the first screen.
    const summary = h('summary', { 'data-test': 'filters-summary' });
    const el = h('details', { class: 'filter-panel', 'data-test': 'filters' }, summary, form);
    el.open = window.matchMedia('(min-width: 48rem)').matches || activeCount() > 0;
    showActive();

    function activeCount() {
      return FILTERS.filter((name) => name !== 'since' && name !== 'until' && !(endpointId && name === 'endpoint_id') && current[name]).length;
    }

    function showActive() {
      const n = activeCount();
      summary.textContent = n ? t('Filters ({count} set)', { count: n }) : t('Filters');
    }

    function clear() {
      form.reset();
      for (const control of [state, eventType, endpoint, status, range, since, until, eventId]) control.value = '';
      custom.hidden = true;
      apply(read());
      showActive();
    }

    return {
      el,
      setEndpoints(list) {
        const chosen = endpoint.value || current.endpoint_id;
        // An id from the address that is not in the list (deleted, or mistyped) stays visible as chosen.
        const unknown = chosen && !list.some((e) => e.id === chosen);
        replace(
          endpoint,
          h('option', { value: '' }, t('All endpoints')),
          list.map((e) => h('option', { value: e.id, translate: 'no' }, e.description ? `${e.url} — ${e.description}` : e.url)),
          unknown && h('option', { value: chosen, translate: 'no' }, chosen),
        );
        endpoint.value = chosen;
      },
      setEventTypes(types) {
        replace(typeList, types.map((type) => h('option', { value: type.name, translate: 'no' }, type.description)));
      },
    };
  }
}
