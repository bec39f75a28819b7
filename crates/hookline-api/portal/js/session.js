// session.js — where the portal's session comes from and where it is kept.
//
// A customer opens `/portal/apps/{app}/#code=<one-time code>`. The code is
// taken out of the address at once (so it is not left in history, bookmarks
// or a shared screenshot) and, on the customer's "Continue" (main.js),
// exchanged for a session, whose key the server keeps in an HttpOnly cookie
// (api.js); what the page shows of it (its app, capabilities, end) is kept in
// sessionStorage: it lives as long as the tab, and is per app so two portals
// in one browser don't mix.

const KEY_PREFIX = 'hookline.portal.session.';

/** The `{app}` of `/portal/apps/{app}/…`, or null when the address is not a portal page. */
export function appFromPath(pathname) {
  const match = /^\/portal\/apps\/([^/]+)\/?/.exec(pathname);
  return match ? decodeURIComponent(match[1]) : null;
}

/**
 * The link's fragment, `#code=…[&to=/screen][&redeem=load]`, removed from the
 * address at once (which then shows the router's default screen, Status):
 * `{ code, to, onLoad }`, `to` a portal route or null; null when there is no code.
 */
export function takeCodeFromHash() {
  if (!location.hash.startsWith('#code=')) return null;
  const params = new URLSearchParams(location.hash.slice(1));
  history.replaceState(null, '', `${location.pathname}${location.search}#/`);
  const to = params.get('to');
  return {
    code: params.get('code'),
    to: to && isScreen(to) ? to : null,
    onLoad: params.get('redeem') === 'load',
  };
}

/** A portal route a link may name: `/`, then `A-Z a-z 0-9 _ . / ? = & -`, no `.` or `..` segment. */
export function isScreen(to) {
  return /^\/[A-Za-z0-9_./?=&-]*$/.test(to) && !to.split('?')[0].split('/').some((s) => s === '.' || s === '..');
}

const LINK_PREFIX = 'hookline.portal.link.';

/**
 * A link whose code is not spent yet, kept for this tab until it is (or is
 * refused for good), so a reload on "Continue" or a failed attempt loses nothing.
 */
export function keepLink(app, link) {
  sessionStorage.setItem(LINK_PREFIX + app, JSON.stringify(link));
}

export function pendingLink(app) {
  try {
    const kept = JSON.parse(sessionStorage.getItem(LINK_PREFIX + app));
    return kept && typeof kept.code === 'string' ? kept : null;
  } catch {
    return null;
  }
}

export function dropLink(app) {
  sessionStorage.removeItem(LINK_PREFIX + app);
}

/**
 * Keeps `{app_id, capabilities, expires_at, renewable_until, span_ms}` for
 * this tab (`span_ms`: how long it lasts between renewals, as first seen): what
 * the page shows, never the key.
 */
export function save(app, session) {
  // The key itself is not kept here: it is in the session's HttpOnly cookie.
  const kept = {
    app_id: session.app_id ?? app,
    capabilities: session.capabilities ?? [],
    expires_at: session.expires_at ?? null,
    renewable_until: session.renewable_until ?? null,
    span_ms: session.span_ms ?? (session.expires_at ? Date.parse(session.expires_at) - Date.now() : null),
  };
  sessionStorage.setItem(KEY_PREFIX + app, JSON.stringify(kept));
  return kept;
}

/** The kept session, or null (none, or unreadable). */
export function load(app) {
  try {
    const kept = JSON.parse(sessionStorage.getItem(KEY_PREFIX + app));
    return kept && typeof kept.app_id === 'string' ? kept : null;
  } catch {
    return null;
  }
}

// A screen asked for without a session (a bookmark), kept for the next sign-in in this browser.
const SCREEN_PREFIX = 'hookline.portal.screen.';
const SCREEN_KEPT_MS = 60 * 60 * 1000;

/** Forgets the tab's session, and any screen remembered for the next sign-in. */
export function clear(app) {
  sessionStorage.removeItem(KEY_PREFIX + app);
  localStorage.removeItem(SCREEN_PREFIX + app);
}

/**
 * Remembers `to`, the screen a page without a session was opened at (or the
 * one a session ended on), for an hour: signing in through a new link that
 * names no screen lands there.
 */
export function rememberScreen(app, to) {
  localStorage.setItem(SCREEN_PREFIX + app, JSON.stringify({ to, at: Date.now() }));
}

/** The remembered screen (forgotten as it is taken), or null (none, or older than an hour). */
export function takeRememberedScreen(app, now = Date.now()) {
  try {
    const kept = JSON.parse(localStorage.getItem(SCREEN_PREFIX + app));
    localStorage.removeItem(SCREEN_PREFIX + app);
    return kept && now - kept.at < SCREEN_KEPT_MS && isScreen(kept.to) ? kept.to : null;
  } catch {
    return null;
  }
}

/** Whether the session's expiry has passed (a session without one lasts until a 401). */
export function isExpired(session, now = Date.now()) {
  return session.expires_at ? Date.parse(session.expires_at) <= now : false;
}

/** Whether the session may do what `capability` allows (`read`, `endpoints`, `secrets`, `replay`, `publish`). */
export function can(session, capability) {
  return Array.isArray(session?.capabilities) && session.capabilities.includes(capability);
}

// setTimeout's longest delay (about 24.8 days); longer waits are re-armed.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Calls `onExpired` when `expires_at` passes; returns a function that cancels the timer. */
export function whenExpired(session, onExpired) {
  if (!session.expires_at) return () => {};
  const at = Date.parse(session.expires_at);
  let timer;
  const arm = () => {
    const wait = at - Date.now();
    if (wait <= 0) {
      onExpired();
      return;
    }
    timer = setTimeout(arm, Math.min(wait, MAX_TIMER_MS));
  };
  arm();
  return () => clearTimeout(timer);
}
