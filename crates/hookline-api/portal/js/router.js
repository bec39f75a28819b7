// router.js — hash routes (`#/endpoints/ep_…`, `#/deliveries?state=dead`) to screens.
//
// The page is one HTML document served at /portal/apps/{app}/, so the screen
// lives in the fragment: reloads and shared links land on the same screen and
// the server needs no route per screen.
//
// Each visit of a screen gets a fresh context with an AbortSignal. Leaving
// the screen aborts it: its requests are cancelled and the timers it made
// with `ctx.every`/`ctx.after` stop, so a screen never has to clean up by
// hand, and a late answer lands in a detached root that nobody sees.

import { h } from './dom.js';
import { isolate, t } from './i18n.js';
import { notFound, showProblem, problemSlot } from './ui.js';

/** `#/deliveries/dlv_1?state=dead` → `{ path: ['deliveries', 'dlv_1'], query }`; null for a non-route fragment. */
export function parseHash(hash) {
  if (hash === '' || hash === '#' || hash === '#/') return { path: [], query: new URLSearchParams() };
  if (!hash.startsWith('#/')) return null;
  const [path, query = ''] = hash.slice(2).split('?');
  return {
    path: path.split('/').filter(Boolean).map(decodeURIComponent),
    query: new URLSearchParams(query),
  };
}

/** The fragment for a path and query: `hashFor(['deliveries'], {state: 'dead'})`. */
export function hashFor(path, query = {}) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') params.set(name, value);
  }
  const text = params.toString();
  return `#/${path.map(encodeURIComponent).join('/')}${text ? `?${text}` : ''}`;
}

/** Matches a path against a pattern like `['endpoints', ':id']`; returns the params or null. */
function match(pattern, path) {
  if (pattern.length !== path.length) return null;
  const params = {};
  for (let i = 0; i < pattern.length; i += 1) {
    if (pattern[i].startsWith(':')) params[pattern[i].slice(1)] = path[i];
    else if (pattern[i] !== path[i]) return null;
  }
  return params;
}

/**
 * Starts routing into `view`. `routes`: `[{ name, pattern, screen }]`, the
 * first whose pattern matches wins; an empty path is `defaultHash`.
 * `context` is merged into each screen's context (capabilities, titles…);
 * `onRoute(name)` is told which route shows (to mark the navigation).
 */
export function createRouter({ view, routes, defaultHash, context, onRoute }) {
  let controller = null;
  let firstRender = true;

  function render() {
    const parsed = parseHash(location.hash);
    // A fragment that is not a route (the skip link's #main) leaves the screen as it is.
    if (!parsed) return;
    if (parsed.path.length === 0) {
      history.replaceState(null, '', defaultHash);
      render();
      return;
    }
    controller?.abort();
    controller = new AbortController();
    const root = h('div', { class: 'screen' });
    view.replaceChildren(root);

    const found = routes.map((r) => ({ route: r, params: match(r.pattern, parsed.path) })).find((m) => m.params);
    onRoute?.(found?.route.name ?? null);
    const ctx = screenContext({ root, signal: controller.signal, params: found?.params ?? {}, query: parsed.query, context, refresh: render });
    if (!found) {
      ctx.title(t('Not found'));
      root.append(notFound());
    } else {
      // Called now, not in a later task: a screen draws its heading before its
      // first await, so the focus below finds it.
      try {
        Promise.resolve(found.route.screen(ctx)).catch((error) => ctx.fail(error));
      } catch (error) {
        ctx.fail(error);
      }
    }
    // After a navigation (not the first load), start reading at the new screen's heading.
    if (!firstRender) root.querySelector('h1')?.focus();
    firstRender = false;
  }

  const onHashChange = () => render();
  return {
    start() {
      window.addEventListener('hashchange', onHashChange);
      render();
    },
    stop() {
      window.removeEventListener('hashchange', onHashChange);
      controller?.abort();
    },
  };
}

/** What a screen gets: where to draw, its parameters, and timers that die with it. */
function screenContext({ root, signal, params, query, context, refresh }) {
  const ctx = {
    ...context,
    root,
    signal,
    params,
    query,
    refresh,
    /** The page's title: `text` (in the reader's language), then the portal's name. */
    title(text) {
      document.title = `${text} · ${isolate(context.portalName())}`;
    },
    /** Calls `fn` every `ms` while the screen shows; returns a stop function. */
    every(ms, fn) {
      const id = setInterval(fn, ms);
      const stop = () => clearInterval(id);
      signal.addEventListener('abort', stop, { once: true });
      return stop;
    },
    /** Calls `fn` once after `ms`, unless the screen was left. */
    after(ms, fn) {
      const id = setTimeout(fn, ms);
      const stop = () => clearTimeout(id);
      signal.addEventListener('abort', stop, { once: true });
      return stop;
    },
    /**
     * A screen's load failed: 404 is "Not found" (an unknown id, or another
     * app's); anything else is shown where the screen would be.
     */
    fail(error) {
      if (signal.aborted || error?.name === 'AbortError' || error?.sessionEnded) return;
      if (error?.status === 404) {
        ctx.title(t('Not found'));
        root.replaceChildren(notFound());
        return;
      }
      const slot = problemSlot();
      if (!root.querySelector('h1')) root.append(h('h1', { tabindex: '-1' }, t('Something went wrong')));
      root.append(slot);
      showProblem(slot, error);
    },
  };
  return ctx;
}
