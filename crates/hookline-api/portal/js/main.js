// main.js — the portal's start: sign in, brand the page, route to screens.
//
// # Layout
//
// - session.js   where the session comes from (the link's one-time code) and is kept
// - api.js       the one client of the /v1 API; problems and the session's end
// - router.js    hash routes to screens, with a per-visit scope for requests and timers
// - branding.js  the provider's name, logo, colour and theme
// - ui.js, dom.js, format.js, words.js   building blocks and vocabulary
// - i18n.js      the words in the reader's language (locales/: one table per language);
//                index.html's own words are put in it here, once the language is chosen
// - chart.js     small inline SVG charts: bars, and columns over time
// - screens/     one module per screen; deliveries.js also exports the delivery log,
//                endpoint-timeline.js an endpoint's attempts over time with its changes marked

import * as api from './api.js';
import * as session from './session.js';
import { keepAlive } from './renewal.js';
import { applyBranding, portalName } from './branding.js';
import { isolate, language, msg, pickLanguage, t, useLanguage } from './i18n.js';
import { createRouter } from './router.js';
import { h } from './dom.js';
import { announce, errorPage, whileBusy } from './ui.js';
import { endpointsScreen } from './screens/endpoints.js';
import { statusScreen } from './screens/status.js';
import { endpointScreen } from './screens/endpoint.js';
import { deliveriesScreen } from './screens/deliveries.js';
import { deliveryScreen } from './screens/delivery.js';
import { catalogScreen } from './screens/catalog.js';
import { recoverScreen } from './screens/recover.js';
import { notificationsScreen } from './screens/notifications.js';

const ASK_FOR_A_LINK = msg('Ask your provider for a new link to the portal.');

/** What a failed sign-in's problem `code` means, in plain words. */
const LINK_PROBLEMS = {
  portal_code_used: msg('This link has already been used'),
  portal_code_expired: msg('This link has expired'),
  portal_code_invalid: msg('This link is not valid'),
  app_not_found: msg('This link is not valid'),
};

const view = document.getElementById('view');
let app = null;
let appKey = null;
let signedOut = false;
let router = null;
let stopExpiryTimer = () => {};
let keeper = null;
// The key of the session this page signed in to (used only in a frame: api.configure).
let signedInKey = null;

document.getElementById('skip-link').addEventListener('click', (event) => {
  // The fragment is the router's: move focus without changing it.
  event.preventDefault();
  document.getElementById('main').focus();
});

boot().catch((error) => {
  console.error(error);
  showPage({
    heading: t('The portal could not start'),
    detail: error?.message,
    advice: t('Reload the page to try again.'),
  });
});

async function boot() {
  // Until the app is read, the browser's language; then the app's, if it sets one.
  await useLanguage(pickLanguage(null, navigator.languages));
  translatePage();
  appKey = session.appFromPath(location.pathname);
  if (!appKey) {
    showPage({
      heading: t('This page address is not valid'),
      advice: t('Open the portal through the link your provider gave you.'),
    });
    return;
  }
  const fresh = session.takeCodeFromHash();
  if (fresh) session.keepLink(appKey, fresh);
  const link = fresh ?? session.pendingLink(appKey);
  // A link's code is spent on the customer's click, unless the link says
  // otherwise: a mail scanner that opens links (and runs scripts) spends
  // nothing. A failure that may pass (no answer, a 5xx) offers it again.
  let current = null;
  if (link) {
    let trouble = null;
    for (;;) {
      if (!link.onLoad || trouble) await continueClicked(trouble);
      const answer = await signIn(appKey, link.code);
      if (!answer?.retry) {
        session.dropLink(appKey);
        current = answer?.session ?? null;
        break;
      }
      trouble = answer.message;
    }
  } else {
    current = session.load(appKey) ?? (await resume(appKey));
  }
  if (!current) {
    if (!link) {
      // A bookmark: its screen is where the next sign-in lands.
      const wanted = location.hash.slice(1);
      const bookmarked = session.isScreen(wanted) && !['/', '/status'].includes(wanted);
      if (bookmarked) session.rememberScreen(appKey, wanted);
      showPage({
        heading: t('No session'),
        detail: bookmarked
          ? t('Open the portal through a new link from your provider: you will land on this screen.')
          : t('Open the portal through the link your provider gave you.'),
        advice: t(ASK_FOR_A_LINK),
      });
    }
    return;
  }
  const ended = (problem) => endSession(appKey, problem);
  if (session.isExpired(current)) {
    ended(null);
    return;
  }
  // In a frame, a browser may send no cookie of another site (SameSite, and
  // third-party cookies blocked): the key from this sign-in stays in memory
  // for this page's life (a reload there takes a new link from the parent).
  const framed = window.self !== window.top;
  api.configure({ app: current.app_id, token: framed ? signedInKey : null, onSessionEnded: ended });
  // Until the app is read (its frame origins), its end alone is watched.
  stopExpiryTimer = session.whenExpired(current, () => ended(null));

  try {
    app = await api.getApp();
  } catch (problem) {
    if (problem.sessionEnded) return;
    showPage({
      heading: problem.status === 404 ? t('This portal does not exist') : t('The portal could not be opened'),
      detail: problem.message,
      advice: t(ASK_FOR_A_LINK),
    });
    return;
  }
  await useLanguage(pickLanguage(app.portal?.language, navigator.languages));
  translatePage();
  applyBranding(app);
  // From here on the session is renewed while in use, and says before it ends.
  stopExpiryTimer();
  keeper = keepAlive({
    current,
    save: (kept) => session.save(appKey, kept),
    onEnded: () => ended(null),
    frameOrigins: app.portal?.frame_origins ?? [],
  });
  stopExpiryTimer = () => keeper.stop();
  const can = (capability) => session.can(current, capability);
  buildNav(can);
  router = createRouter({
    view,
    routes: routes(can),
    defaultHash: '#/status',
    context: { can, portalName: () => portalName(app) },
    onRoute: markNav,
  });
  // The screen the link named, else the bookmark opened before it, once signed in.
  const remembered = link ? session.takeRememberedScreen(appKey) : null;
  const to = link ? (link.to ?? remembered) : null;
  if (to) history.replaceState(null, '', `${location.pathname}${location.search}#${to}`);
  router.start();
  // From "Continue", reading starts at the screen's heading.
  if (link) view.querySelector('h1')?.focus();
}

/**
 * The session this browser holds for the app (its cookie) that this tab has
 * not seen — a bookmark, a new tab: renewing it says what it may do. Null
 * when there is none.
 */
async function resume(appKey) {
  api.configure({ app: appKey, onSessionEnded: () => {} });
  try {
    return session.save(appKey, await api.renewSession());
  } catch {
    return null;
  }
}

/**
 * index.html's own words (skip link, default name, loading, title) in the
 * reader's language: a page in another language shows no English.
 */
function translatePage() {
  document.getElementById('skip-link').textContent = t('Skip to content');
  document.getElementById('brand-name').textContent = t('Webhooks portal');
  document.getElementById('nav').setAttribute('aria-label', t('Portal'));
  const waiting = view.querySelector('.loading');
  if (waiting) waiting.textContent = t('Loading…');
  document.title = t('Webhooks portal');
}

/** Shows "Continue" (with what went wrong last time, if anything) and resolves on its click. */
function continueClicked(trouble = null) {
  return new Promise((resolve) => {
    const button = h('button', { type: 'button', class: 'primary', 'data-test': 'continue' }, t('Continue'));
    button.addEventListener('click', () => {
      button.textContent = t('Signing in…');
      button.setAttribute('aria-disabled', 'true');
      button.setAttribute('aria-busy', 'true');
      resolve();
    });
    document.getElementById('nav').hidden = true;
    document.title = t('Your webhooks portal');
    view.replaceChildren(
      h(
        'section',
        { class: 'continue', 'data-test': 'continue-page' },
        h('h1', { tabindex: '-1' }, t('Your webhooks portal')),
        h('p', {}, t('This link signs you in once. Continue to see your endpoints, their deliveries and what is wrong now.')),
        trouble &&
          h(
            'p',
            { class: 'problem', role: 'alert', 'data-test': 'problem' },
            t('Signing in did not work: {problem} Try again.', { problem: trouble }),
          ),
        h('p', {}, button),
      ),
    );
    button.focus();
  });
}

/**
 * Exchanges the link's one-time code for a session: `{session}`; `{retry,
 * message}` when it may work again (no answer, a 5xx: the code is unspent);
 * null (after showing why) when it was refused for good.
 */
async function signIn(appKey, code) {
  try {
    const answer = await api.exchangeCode(code);
    signedInKey = answer.token;
    return { session: session.save(appKey, answer) };
  } catch (problem) {
    if (!problem?.status || problem.status >= 500) {
      // (A problem's message is its detail, else its title; in another language, with what happened first.)
      return { retry: true, message: problem?.message || t('no answer from the server.') };
    }
    const known = Object.hasOwn(LINK_PROBLEMS, problem.code) ? LINK_PROBLEMS[problem.code] : null;
    const heading = known
      ? t(known)
      : problem.status === 404 || problem.status === 401
        ? t('This link is not valid')
        : t('Signing in did not work');
    showPage({ heading, detail: problem.message, advice: t(ASK_FOR_A_LINK) });
    return null;
  }
}

/** The session is over (expired, or a 401: revoked): forget it and say so. */
function endSession(appKey, problem) {
  // A request still under way when the customer signed out ends like this too.
  if (signedOut) return;
  session.clear(appKey);
  // The next sign-in lands where the customer was.
  const was = location.hash.slice(1);
  if (session.isScreen(was)) session.rememberScreen(appKey, was);
  stopExpiryTimer();
  router?.stop();
  showPage({
    heading: t('Your session has expired'),
    // The server's detail (in another language, after what happened in the reader's words).
    detail: (problem?.detail && (language() === 'en' ? problem.detail : problem.message)) ||
      t('Sessions last a limited time, and this one has ended.'),
    advice: t(ASK_FOR_A_LINK),
  });
}

/** Ends this session on the server (its key stops working), then forgets it here. */
async function signOut(event) {
  try {
    await whileBusy(event.currentTarget, () => api.signOut());
  } catch (problem) {
    // A session already over is signed out all the same; anything else is said, and nothing is forgotten.
    if (!problem.sessionEnded) {
      announce(t('Signing out did not work: {problem}', { problem: problem.message }));
      return;
    }
  }
  signedOut = true;
  api.forget();
  session.clear(appKey);
  stopExpiryTimer();
  router?.stop();
  showPage({
    heading: t('You are signed out'),
    detail: t('This session has ended.'),
    advice: t('To come back, open the portal through a new link from your provider.'),
  });
}

/** Replaces the portal with a full-page message (no navigation: there is nowhere to go). */
function showPage(message) {
  document.getElementById('nav').hidden = true;
  document.title = `${message.heading} · ${isolate(portalName(app))}`;
  view.replaceChildren(errorPage(message));
  view.querySelector('h1')?.focus();
}

/** The routes this session may see (recovering needs `replay`). */
function routes(can) {
  const all = [
    { name: 'status', pattern: ['status'], screen: statusScreen },
    { name: 'endpoints', pattern: ['endpoints'], screen: endpointsScreen },
    { name: 'endpoints', pattern: ['endpoints', ':id'], screen: endpointScreen },
    { name: 'deliveries', pattern: ['deliveries'], screen: deliveriesScreen },
    { name: 'deliveries', pattern: ['deliveries', ':id'], screen: deliveryScreen },
    { name: 'catalog', pattern: ['catalog'], screen: catalogScreen },
    { name: 'notifications', pattern: ['notifications'], screen: notificationsScreen },
    { name: 'recover', pattern: ['recover'], screen: recoverScreen, needs: 'replay' },
  ];
  return all.filter((route) => !route.needs || can(route.needs));
}

const NAV = [
  { name: 'status', label: msg('Status') },
  { name: 'endpoints', label: msg('Endpoints') },
  { name: 'deliveries', label: msg('Deliveries') },
  { name: 'catalog', label: msg('Event catalog') },
  { name: 'notifications', label: msg('Notifications') },
  { name: 'recover', label: msg('Recover'), needs: 'replay' },
];

function buildNav(can) {
  const list = document.getElementById('nav-list');
  list.replaceChildren(
    ...NAV.filter((item) => !item.needs || can(item.needs)).map((item) =>
      h('li', {}, h('a', { href: `#/${item.name}`, 'data-test': `nav-${item.name}`, 'data-nav': item.name }, t(item.label))),
    ),
    h('li', { class: 'nav-end' }, h('button', { type: 'button', 'data-test': 'sign-out', onclick: signOut }, t('Sign out'))),
  );
  document.getElementById('nav').hidden = false;
}

/** Marks the current section's link (`aria-current`, which the CSS also shows). */
function markNav(name) {
  for (const link of document.querySelectorAll('#nav-list a')) {
    if (link.dataset.nav === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}
