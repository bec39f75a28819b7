// screens/endpoint-advanced.js — the endpoint form's "Advanced settings":
// custom headers, how the endpoint authenticates us (a bearer token or Basic;
// OAuth2 and client certificates are shown, and set through the API), the
// retry policy, how many requests may be in flight at once, what a failed
// event does to the rest of its ordering key, and whether the endpoint's
// sequence number is in the signed body (docs/api.md, "Sequence numbers"). Secrets show as the API shows
// them: `…` to a session without `secrets`. Only what the person changed is
// sent, so a hidden value is never overwritten by its mask. Words through
// i18n.js (the placeholder is an example header, left as it is).

import { h } from '../dom.js';
import { t } from '../i18n.js';
import { field, select } from '../ui.js';

const HIDDEN = '…';

/**
 * `endpoint`: the EndpointView being changed, or null when creating. Returns
 * `{ section, changes(), controls }`: `changes()` the body fields the person
 * changed (throws a Problem-like error for a value the form can tell is wrong).
 */
export function advancedSettings(endpoint) {
  const headers = endpoint?.headers ?? {};
  const headerText = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}`)
    .join('\n');
  const masked = Object.values(headers).some((value) => value === HIDDEN);
  const headersBox = h('textarea', {
    id: 'endpoint-headers',
    rows: 3,
    spellcheck: 'false',
    class: 'code',
    placeholder: 'x-team: billing',
    readonly: masked,
  });
  headersBox.value = headerText;

  const auth = endpoint?.auth ?? null;
  const current = auth?.oauth2 ? 'oauth2' : auth?.basic ? 'basic' : auth?.bearer ? 'bearer' : auth?.tls ? 'tls' : 'none';
  const kinds = [
    ['none', t('None (the signature only)')],
    ['bearer', t('Bearer token')],
    ['basic', t('Basic (user name and password)')],
  ];
  if (current === 'oauth2') kinds.push(['oauth2', t('OAuth2 client credentials ({token_url})', { token_url: auth.oauth2.token_url })]);
  if (current === 'tls') kinds.push(['tls', t('A client certificate')]);
  const authKind = select({ id: 'endpoint-auth', 'data-test': 'endpoint-auth' }, kinds, current);
  const bearer = h('input', { id: 'endpoint-bearer', type: 'text', autocomplete: 'off', spellcheck: 'false', dir: 'ltr', value: auth?.bearer ?? '' });
  const user = h('input', { id: 'endpoint-basic-user', type: 'text', autocomplete: 'off', value: auth?.basic?.username ?? '' });
  const password = h('input', { id: 'endpoint-basic-password', type: 'text', autocomplete: 'off', spellcheck: 'false', dir: 'ltr', value: auth?.basic?.password ?? '' });
  const bearerField = field(t('Bearer token'), bearer, t('Sent as {header} with every request.', { header: 'Authorization: Bearer …' }));
  const basicFields = h('div', {}, field(t('User name'), user), field(t('Password'), password));
  const showAuth = () => {
    bearerField.hidden = authKind.value !== 'bearer';
    basicFields.hidden = authKind.value !== 'basic';
  };
  authKind.addEventListener('change', showAuth);
  showAuth();

  const number = (id, value, min, max, hint) =>
    h('input', { id, type: 'number', min, max, step: 1, inputmode: 'numeric', value: value ?? '', 'aria-describedby': hint ? `${id}-hint` : null });
  const retry = endpoint?.retry ?? {};
  const attempts = number('endpoint-max-attempts', retry.max_attempts, 1, 1000);
  const maxAgeHours = number('endpoint-max-age', retry.max_age_secs ? retry.max_age_secs / 3600 : '', 1, 720);
  const inFlight = number('endpoint-max-in-flight', endpoint?.max_in_flight, 1, 1024);
  const onDead = select(
    { id: 'endpoint-ordering-on-dead', 'data-test': 'endpoint-ordering-on-dead' },
    [
      ['skip', t('The next event goes on; the failed one waits for you to replay it')],
      ['block', t('Its later events wait until the failed one is replayed and delivered')],
    ],
    endpoint?.ordering_on_dead ?? 'skip',
  );

  // On for a new endpoint, as the API has it.
  const seqInBody = h('input', {
    id: 'endpoint-seq-in-body',
    type: 'checkbox',
    'data-test': 'endpoint-seq-in-body',
    checked: endpoint ? endpoint.seq_in_body : true,
    'aria-describedby': 'endpoint-seq-in-body-hint',
  });
  const seqField = h(
    'div',
    { class: 'field' },
    h('label', { class: 'check' }, seqInBody, h('span', { class: 'check-text' }, t('Put the sequence number in the signed body'))),
    h(
      'p',
      { class: 'hint', id: 'endpoint-seq-in-body-hint' },
      t('Every delivery to this endpoint is numbered 1, 2, 3, … with no gaps, in the {header} header. In the body too, as {field}, it is signed, so your endpoint can trust it to find a missed event. Turn it off if your endpoint refuses unknown fields.', {
        header: 'hookline-endpoint-sequence',
        field: 'seq',
      }),
    ),
  );

  const section = h(
    'details',
    { class: 'advanced', 'data-test': 'endpoint-advanced' },
    h('summary', {}, t('Advanced settings')),
    field(
      t('Custom headers, one per line'),
      headersBox,
      masked ? t('Their values are hidden from this session, so they cannot be changed here.') : t('Sent with every request, as name: value.'),
    ),
    h(
      'fieldset',
      {},
      h('legend', {}, t('How your endpoint knows it is us, besides the signature')),
      field(t('Authentication'), authKind),
      bearerField,
      basicFields,
    ),
    h(
      'fieldset',
      {},
      h('legend', {}, t('Retries')),
      field(t('Attempts before a delivery fails for good'), attempts, t('Empty: the default.')),
      field(t('Stop retrying after (hours)'), maxAgeHours, t('Empty: the default.')),
    ),
    field(t('Requests in flight at once, at most'), inFlight, t('Empty: adapts to how fast your endpoint answers.')),
    field(t('When an event with an ordering key fails for good'), onDead),
    seqField,
  );

  const initial = {
    headers: headerText,
    auth: JSON.stringify([current, auth?.bearer ?? '', auth?.basic?.username ?? '', auth?.basic?.password ?? '']),
    attempts: attempts.value,
    maxAge: maxAgeHours.value,
    inFlight: inFlight.value,
    onDead: onDead.value,
    seqInBody: seqInBody.checked,
  };
  const problem = (message, control) => {
    const error = new Error(message);
    error.name = 'Problem';
    error.code = 'advanced_setting';
    error.control = control;
    return error;
  };
  const whole = (input, what) => {
    const text = input.value.trim();
    if (text === '') return null;
    const n = Number(text);
    if (!Number.isInteger(n) || n < Number(input.min) || n > Number(input.max)) {
      throw problem(t('{what} must be a whole number from {min} to {max}.', { what, min: input.min, max: input.max }), input);
    }
    return n;
  };

  function changes() {
    const body = {};
    if (headersBox.value !== initial.headers) {
      const parsed = {};
      for (const line of headersBox.value.split('\n').map((l) => l.trim()).filter(Boolean)) {
        const at = line.indexOf(':');
        if (at <= 0) throw problem(t('“{line}” is not a header: write it as name: value.', { line }), headersBox);
        parsed[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
      }
      body.headers = parsed;
    }
    const authNow = JSON.stringify([authKind.value, bearer.value, user.value, password.value]);
    if (authNow !== initial.auth) {
      if (authKind.value === 'none') body.auth = null;
      else if (authKind.value === 'bearer') body.auth = { bearer: bearer.value.trim() };
      else if (authKind.value === 'basic') body.auth = { basic: { username: user.value.trim(), password: password.value } };
    }
    if (attempts.value !== initial.attempts || maxAgeHours.value !== initial.maxAge) {
      const retryBody = { ...retry };
      const max = whole(attempts, t('Attempts'));
      const hours = whole(maxAgeHours, t('Hours'));
      if (max === null) delete retryBody.max_attempts;
      else retryBody.max_attempts = max;
      if (hours === null) delete retryBody.max_age_secs;
      else retryBody.max_age_secs = hours * 3600;
      body.retry = retryBody;
    }
    if (inFlight.value !== initial.inFlight) body.max_in_flight = whole(inFlight, t('Requests in flight'));
    if (onDead.value !== initial.onDead) body.ordering_on_dead = onDead.value;
    if (seqInBody.checked !== initial.seqInBody) body.seq_in_body = seqInBody.checked;
    return body;
  }

  return { section, changes, controls: [headersBox, authKind, bearer, user, password, attempts, maxAgeHours, inFlight, onDead, seqInBody] };
}
