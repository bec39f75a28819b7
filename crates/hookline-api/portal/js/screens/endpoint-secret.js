// screens/endpoint-secret.js — an endpoint's signing secret (the `secrets`
// capability): reveal it on request (never on load: it should not sit on a
// screen someone else may see), copy it, and rotate it with a grace period in
// which the old secret keeps signing beside the new one. Words through i18n.js.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { dateTime } from '../format.js';
import { msg, t } from '../i18n.js';
import { announce, clearProblem, confirmAction, copyText, field, problemSlot, select, showProblem, whileBusy } from '../ui.js';

/** Grace choices (`grace_secs`: 0 to 604 800, the API's default a day). */
const GRACE_OPTIONS = [
  ['0', msg('No overlap: the old secret stops at once')],
  ['3600', msg('1 hour')],
  ['86400', msg('24 hours')],
  ['604800', msg('7 days')],
];

export function secretSection(endpoint) {
  const problem = problemSlot();
  const shown = h('div', { class: 'secret-shown' });
  const previous = h('p', { class: 'hint' }, previousNote(endpoint.previous_secret_valid_until));

  const reveal = h('button', { type: 'button', 'data-test': 'secret-reveal' }, t('Reveal secret'));
  reveal.addEventListener('click', async () => {
    clearProblem(problem);
    try {
      const { key } = await whileBusy(reveal, () => api.endpointSecret(endpoint.id));
      showKey(key);
    } catch (error) {
      showProblem(problem, error);
    }
  });

  const grace = select({ id: 'rotate-grace', name: 'grace_secs' }, GRACE_OPTIONS.map(([value, label]) => [value, t(label)]), '86400');
  const rotate = h('button', { type: 'submit', class: 'danger', 'data-test': 'secret-rotate', 'data-mutating': true }, t('Rotate secret'));
  const rotateForm = h(
    'form',
    { class: 'rotate', 'data-mutating': true, 'aria-label': t('Rotate the signing secret') },
    field(
      t('Keep the old secret signing for'),
      grace,
      t('Meanwhile every request carries both signatures, so your receiver can switch at its own pace.'),
    ),
    rotate,
  );
  rotateForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearProblem(problem);
    const graceSecs = Number(grace.value);
    const sure = await confirmAction({
      title: t('Rotate the signing secret?'),
      message:
        graceSecs === 0
          ? t('A new secret signs from now on and the old one stops at once: receivers still checking with the old secret will reject requests. This cannot be undone.')
          : t('A new secret signs from now on; the old one keeps signing beside it for {grace}. This cannot be undone.', {
              grace: grace.selectedOptions[0].textContent,
            }),
      yes: t('Rotate secret'),
    });
    if (!sure) return;
    try {
      const rotated = await whileBusy(rotate, () => api.rotateSecret(endpoint.id, { grace_secs: graceSecs }));
      showKey(rotated.key);
      previous.textContent = previousNote(rotated.previous_valid_until);
      announce(t('Secret rotated. The new secret is shown.'));
    } catch (error) {
      showProblem(problem, error);
    }
  });

  return h(
    'section',
    { class: 'section', 'aria-labelledby': 'secret-heading' },
    h('h2', { id: 'secret-heading' }, t('Signing secret')),
    h('p', {}, t('Your receiver checks each request’s {header} header with this secret.', { header: 'webhook-signature' })),
    h('div', { class: 'actions' }, reveal),
    shown,
    previous,
    problem,
    rotateForm,
  );

  /** Shows a secret with its copy button and the button's feedback. */
  function showKey(key) {
    const value = h('code', { class: 'secret', 'data-test': 'secret-value' }, key);
    const copied = h('span', { class: 'copied', 'data-test': 'secret-copied', role: 'status' });
    const copy = h('button', { type: 'button', 'data-test': 'secret-copy' }, t('Copy'));
    copy.addEventListener('click', async () => {
      const ok = await copyText(key, value);
      copied.textContent = ok ? t('Copied') : t('Could not copy: select the secret and copy it by hand.');
    });
    replace(shown, value, h('div', { class: 'actions' }, copy, copied));
  }
}

function previousNote(until) {
  return until ? t('The previous secret also signs until {time}.', { time: dateTime(until) }) : '';
}
