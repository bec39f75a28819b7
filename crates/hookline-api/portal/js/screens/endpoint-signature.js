// screens/endpoint-signature.js — "Check a signature": paste what your
// endpoint received (its headers and body) and see whether it verifies with
// this endpoint's secret, and why not — a header missing, the body changed
// since it was sent, another secret, a timestamp older than verifiers accept
// (POST …/signature-check; the secret is never shown). Changes nothing.
// Words through i18n.js (the placeholders are example headers and body);
// the server's verdict comes worded in the portal's language.

import * as api from '../api.js';
import { h, replace } from '../dom.js';
import { t } from '../i18n.js';
import { clearProblem, field, problemSlot, showProblem, whileBusy } from '../ui.js';

export function signatureSection(endpoint) {
  const headers = h('textarea', {
    id: 'check-headers',
    rows: 4,
    spellcheck: 'false',
    class: 'code',
    placeholder: 'webhook-id: msg_…\nwebhook-timestamp: 1796117400\nwebhook-signature: v1,…',
  });
  const body = h('textarea', { id: 'check-body', rows: 6, spellcheck: 'false', class: 'code', placeholder: '{"type": …}' });
  const result = h('div', { 'data-test': 'signature-result', role: 'status' });
  const problem = problemSlot();
  const run = h('button', { type: 'submit', 'data-test': 'signature-check' }, t('Check'));
  const form = h(
    'form',
    { novalidate: true, class: 'signature-check' },
    field(
      t('Headers as received, one per line'),
      headers,
      t('Only {id}, {timestamp} and {signature} are read.', {
        id: 'webhook-id',
        timestamp: 'webhook-timestamp',
        signature: 'webhook-signature',
      }),
    ),
    field(t('Body exactly as received'), body, t('Before any JSON parsing: whitespace and key order count.')),
    problem,
    h('div', { class: 'actions' }, run),
    result,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearProblem(problem);
    replace(result);
    try {
      const answer = await whileBusy(run, () => api.checkSignature(endpoint.id, { headers: parseHeaders(headers.value), body: body.value }));
      replace(
        result,
        h('p', { class: `signature-${answer.signature_valid ? 'valid' : 'invalid'}`, 'data-code': answer.code }, answer.message),
      );
    } catch (error) {
      showProblem(problem, error);
    }
  });
  return h(
    'section',
    { class: 'section', 'aria-labelledby': 'signature-heading' },
    h('h2', { id: 'signature-heading' }, t('Check a signature')),
    h('p', {}, t('Paste a request your endpoint received to see whether it verifies with this endpoint’s secret, and if not, why.')),
    form,
  );
}

/**
 * "name: value" lines (as copied from a log), or a JSON object of them (as a
 * logged `req.headers` prints), to an object; other lines are left out.
 */
export function parseHeaders(text) {
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      return Object.fromEntries(Object.entries(parsed).map(([name, value]) => [name.toLowerCase(), String(value)]));
    }
  } catch {
    // Not JSON: lines.
  }
  const headers = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf(':');
    if (at > 0) headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  return headers;
}
