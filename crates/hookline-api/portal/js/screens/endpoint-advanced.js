// screens/endpoint-advanced.js — the endpoint form's "Advanced settings":
// custom headers, how the endpoint authenticates us (a bearer token or Basic;
// OAuth2 and client certificates are shown, and set through the API), the
// retry policy, how many requests may be in flight at once, what a failed
// event does to the rest of its ordering key, whether the endpoint's
// sequence number is in the signed body (docs/api.md, "Sequence numbers"),
// and batching (docs/api.md, "Batching"), offered only for an HTTP(S) URL.
// Secrets show as the API shows them: `…` to a session without `secrets`.
// Only what the person changed is sent, so a hidden value is never
// overwritten by its mask. Words through i18n.js (the placeholder is an
// example header, left as it is).

import { h } from '../dom.js';
import { t } from '../i18n.js';
import { field, select } from '../ui.js';

const HIDDEN = '…';

/**
 * `endpoint`: the EndpointView being changed, or null when creating. `url`:
 * the form's URL input, whose address decides as it is typed whether
 * batching is offered; without it, the endpoint's saved URL does. Returns
 * `{ section, changes(), controls }`: `changes()` the body fields the person
 * changed (throws a Problem-like error for a value the form can tell is wrong).
 */
export function advancedSettings(endpoint, url = null) {
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

  // Off unless the endpoint batches; turned on, 10 a request within a second
  // until the person says otherwise.
  const batch = endpoint?.batch ?? null;
  const batchOn = h('input', {
    id: 'endpoint-batch',
    type: 'checkbox',
    'data-test': 'endpoint-batch',
    checked: batch !== null,
    'aria-describedby': 'endpoint-batch-hint',
  });
  const batchEvents = number('endpoint-batch-max-events', batch?.max_events ?? 10, 2, 100);
  const batchWait = number('endpoint-batch-max-wait', batch?.max_wait_ms ?? 1000, 0, 10000);
  const batchNumbers = h(
    'div',
    {},
    field(t('Deliveries per request, at most'), batchEvents, t('From {min} to {max}.', { min: batchEvents.min, max: batchEvents.max })),
    field(
      t('Longest wait for more deliveries (milliseconds)'),
      batchWait,
      t('From {min} to {max}: how long the first delivery of a batch may wait for others to join it.', { min: batchWait.min, max: batchWait.max }),
    ),
  );
  const batchField = h(
    'fieldset',
    { 'data-test': 'endpoint-batching' },
    h('legend', {}, t('Batching')),
    h('label', { class: 'check' }, batchOn, h('span', { class: 'check-text' }, t('Send deliveries in batches'))),
    h(
      'p',
      { class: 'hint', id: 'endpoint-batch-hint' },
      t('Several deliveries in one request, signed as one: a {json} array of their envelopes, each with its event’s {id} and {seq}. Your endpoint’s answer counts for all of them. Batching and a transform do not go together.', {
        json: 'JSON',
        id: 'id',
        seq: 'seq',
      }),
    ),
    batchNumbers,
  );
  const showBatch = () => {
    batchField.hidden = !httpAddress(url ? url.value : endpoint?.url ?? '');
    batchNumbers.hidden = !batchOn.checked;
  };
  batchOn.addEventListener('change', showBatch);
  url?.addEventListener('input', showBatch);
  showBatch();
  /** What batching the form holds, as compared with what it started with: off, or its two numbers as typed. */
  const batchShown = () => JSON.stringify(!batchField.hidden && batchOn.checked ? [batchEvents.value, batchWait.value] : null);

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
    batchField,
  );

  const initial = {
    headers: headerText,
    auth: JSON.stringify([current, auth?.bearer ?? '', auth?.basic?.username ?? '', auth?.basic?.password ?? '']),
    attempts: attempts.value,
    maxAge: maxAgeHours.value,
    inFlight: inFlight.value,
    onDead: onDead.value,
    seqInBody: seqInBody.checked,
    batch: batchShown(),
  };
  const problem = (message, control) => {
    const error = new Error(message);
    error.name = 'Problem';
    error.code = 'advanced_setting';
    error.control = control;
    return error;
  };
  const outOfRange = (input, what) =>
    problem(t('{what} must be a whole number from {min} to {max}.', { what, min: input.min, max: input.max }), input);
  const whole = (input, what) => {
    const text = input.value.trim();
    if (text === '') return null;
    const n = Number(text);
    if (!Number.isInteger(n) || n < Number(input.min) || n > Number(input.max)) throw outOfRange(input, what);
    return n;
  };
  // A batch's numbers have no default to fall back on: empty is refused too.
  const required = (input, what) => {
    const n = whole(input, what);
    if (n === null) throw outOfRange(input, what);
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
    // Not offered (the URL is no longer HTTP) counts as off: the API would
    // refuse batching there (409), with no box left to untick.
    if (batchShown() !== initial.batch) {
      body.batch =
        !batchField.hidden && batchOn.checked
          ? { max_events: required(batchEvents, t('Deliveries per request')), max_wait_ms: required(batchWait, t('Longest wait')) }
          : null;
    }
    return body;
  }

  // New controls go at the end: the form names some of these by their place.
  return {
    section,
    changes,
    controls: [headersBox, authKind, bearer, user, password, attempts, maxAgeHours, inFlight, onDead, seqInBody, batchOn, batchEvents, batchWait],
  };
}

/**
 * Whether `address` is an HTTP(S) URL, or on its way to one as it is typed
 * (empty, `h`, `http`…): batching is for those alone. The API's rule
 * (routes/endpoints.rs, `validate_batch`) is the same on the saved URL,
 * whose scheme it has lowercased.
 */
function httpAddress(address) {
  const typed = address.trim().toLowerCase();
  return ['https://', 'http://'].some((scheme) => typed.startsWith(scheme) || scheme.startsWith(typed));
}
