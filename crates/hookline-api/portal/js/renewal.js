// renewal.js — a session that lasts while it is used, and says before it ends.
//
// The server renews a session (POST /portal/session/renew) to its span again
// from now, never past 12 hours after sign-in (`renewable_until`). Here:
// - using the portal (a click, a key, a screen change) renews it once less
//   than half of its span is left, at most once a minute;
// - five minutes before it ends (halfway, for a shorter span), a notice says
//   when, with "Stay signed in" while it can still be renewed;
// - a portal in a frame that cannot be renewed any more asks its parent page
//   for a new link (`postMessage`, `{type: "webhooks-portal:session-ending"}`
//   to each of the app's frame origins) and opens the link the parent sends
//   back (`{type: "webhooks-portal:link", url}`), if it is a link to this portal;
// - when it ends, `onEnded` is called.

import * as api from './api.js';
import { h, replace } from './dom.js';
import { clockTime } from './format.js';
import { t } from './i18n.js';
import { announce } from './ui.js';

const WARN_BEFORE_MS = 5 * 60 * 1000;
const RENEW_AT_MOST_EVERY_MS = 60 * 1000;
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Keeps `current` (`{expires_at, renewable_until, span_ms}`) alive; `save(current)`
 * after each renewal; `frameOrigins` the app's (empty: not framed). Returns
 * `stop()`.
 */
export function keepAlive({ current, save, onEnded, frameOrigins = [] }) {
  const notice = document.getElementById('session-notice');
  let timers = [];
  let lastRenewal = 0;
  let asked = false;
  // Once stopped (the session ended, or signed out), a renewal still under way
  // changes nothing: no save, no timers, no notice.
  let stopped = false;
  const end = () => Date.parse(current.expires_at);
  const renewable = () => current.renewable_until && Date.now() < Date.parse(current.renewable_until) - 1000;

  const clearTimers = () => {
    timers.forEach(clearTimeout);
    timers = [];
  };
  const at = (when, action) => {
    const arm = () => {
      const wait = when - Date.now();
      if (wait <= 0) return action();
      timers.push(setTimeout(arm, Math.min(wait, MAX_TIMER_MS)));
    };
    arm();
  };
  const schedule = () => {
    clearTimers();
    if (stopped || !current.expires_at) return;
    // Five minutes before, or halfway through a shorter span.
    at(end() - Math.min(WARN_BEFORE_MS, (current.span_ms ?? WARN_BEFORE_MS * 2) / 2), warn);
    at(end(), () => {
      stop();
      onEnded();
    });
  };

  async function renew() {
    lastRenewal = Date.now();
    try {
      const renewed = await api.renewSession();
      if (stopped) return false;
      current.expires_at = renewed.expires_at;
      current.renewable_until = renewed.renewable_until;
      save(current);
      schedule();
      return true;
    } catch {
      // Nothing to renew (404: over, or signed out elsewhere) ends with the
      // expiry timer or the next request's 401; anything else is tried again
      // on the next use or from the notice.
      return false;
    }
  }

  function warn() {
    if (stopped) return;
    const ends = t('Your session ends at {time}.', { time: clockTime(current.expires_at) });
    if (renewable()) {
      const said = h('p', { 'data-test': 'session-ending' }, ends, ' ');
      const stay = h('button', { type: 'button', 'data-test': 'session-stay' }, t('Stay signed in'));
      stay.addEventListener('click', async () => {
        if (await renew()) {
          // The button goes with the notice: the focus goes back to the page.
          hideNotice();
          document.getElementById('main').focus();
          announce(t('You stay signed in, until {time} at least.', { time: clockTime(current.expires_at) }));
        } else {
          said.textContent = `${ends} ${t('It could not be renewed; try again in a moment.')} `;
        }
      });
      replace(notice, said, stay);
      return;
    }
    const after = t('To go on after that, open the portal through a new link.');
    replace(notice, h('p', { 'data-test': 'session-ending' }, ends, ' ', after));
    if (window.parent !== window && !asked) {
      asked = true;
      for (const origin of frameOrigins) {
        window.parent.postMessage({ type: 'webhooks-portal:session-ending', expires_at: current.expires_at }, origin);
      }
    }
  }

  // Use renews, once less than half of the span is left.
  const used = () => {
    const left = end() - Date.now();
    if (!renewable() || left > (current.span_ms ?? 0) / 2 || Date.now() - lastRenewal < RENEW_AT_MOST_EVERY_MS) return;
    renew();
  };
  const events = ['pointerdown', 'keydown', 'hashchange'];
  events.forEach((name) => window.addEventListener(name, used, { passive: true }));

  // A new link from the parent page (a framed portal), for this portal only,
  // and only once it was asked for.
  const fromParent = (event) => {
    if (!asked || event.source !== window.parent || !frameOrigins.includes(event.origin)) return;
    if (event.data?.type !== 'webhooks-portal:link') return;
    const url = String(event.data.url ?? '');
    const here = `${location.origin}${location.pathname}#code=`;
    if (!url.startsWith(here)) return;
    location.replace(url);
    location.reload();
  };
  window.addEventListener('message', fromParent);

  function hideNotice() {
    replace(notice);
  }

  function stop() {
    stopped = true;
    clearTimers();
    events.forEach((name) => window.removeEventListener(name, used));
    window.removeEventListener('message', fromParent);
    hideNotice();
  }
  schedule();
  return { stop, renew };
}
