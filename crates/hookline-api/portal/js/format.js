// format.js — times, durations and numbers in the reader's locale.
//
// The API answers RFC 3339 UTC times with milliseconds
// ("2026-12-01T09:30:00.120Z"); people read them in their own time zone, with
// a relative hint ("3 min ago") where that is what they want to know. Pure
// functions (no DOM), in the portal's language (i18n.js).

import { language, msg, t } from './i18n.js';

/** The locale to format in: the browser's own when it is a variant of the portal's language ("en-GB"). */
function locale() {
  const browser = navigator.language ?? '';
  return browser.toLowerCase().split('-')[0] === language() ? browser : language();
}

const formats = new Map();

/** An Intl formatter of `kind` ("date", "number", "relative") with `options`, made once per locale. */
function formatter(kind, options) {
  const key = `${locale()} ${kind} ${JSON.stringify(options)}`;
  if (!formats.has(key)) {
    const make = { date: Intl.DateTimeFormat, number: Intl.NumberFormat, relative: Intl.RelativeTimeFormat }[kind];
    formats.set(key, new make(locale(), options));
  }
  return formats.get(key);
}

const dateTimeFormat = () => formatter('date', { dateStyle: 'medium', timeStyle: 'medium' });
const clockFormat = () => formatter('date', { hour: 'numeric', minute: '2-digit' });
const clockSecondsFormat = () => formatter('date', { hour: 'numeric', minute: '2-digit', second: '2-digit' });
const dayClockFormat = () => formatter('date', { month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit' });
const relativeFormat = () => formatter('relative', { numeric: 'auto' });
const percentFormat = () => formatter('number', { style: 'percent', maximumFractionDigits: 1 });
const integerFormat = () => formatter('number', { maximumFractionDigits: 0 });

export function toDate(value) {
  return value instanceof Date ? value : new Date(value);
}

/** "1 Dec 2026, 09:30:00" (the reader's locale and zone). */
export function dateTime(value) {
  return value ? dateTimeFormat().format(toDate(value)) : '—';
}

/** "14:05" today, "3 Dec, 14:05" on another day: for sentences ("next probe at 14:05"). */
export function clockTime(value, now = new Date()) {
  const date = toDate(value);
  return date.toDateString() === toDate(now).toDateString()
    ? clockFormat().format(date)
    : dayClockFormat().format(date);
}

/** "14:05:09": a countdown's target. */
export function clockSeconds(value) {
  return clockSecondsFormat().format(toDate(value));
}

const UNITS = [
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1000],
];

/** "3 minutes ago", "in 2 hours", "now". */
export function relativeTime(value, now = new Date()) {
  const diff = toDate(value) - toDate(now);
  const size = Math.abs(diff);
  if (size < 5000) return relativeFormat().format(0, 'second');
  const [unit, ms] = UNITS.find(([, unitMs]) => size >= unitMs) ?? UNITS[UNITS.length - 1];
  return relativeFormat().format(Math.round(diff / ms), unit);
}

/** "42 ms", "1.5 s", "15 s", "2 min 5 s", "3 h 20 min", "2 d 4 h" (in the portal's language). */
export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return amount(Math.round(ms), 'ms');
  if (ms < 10_000) return amount(ms / 1000, 's', 1);
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return amount(seconds, 's');
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return join(minutes, 'min', seconds % 60, 's');
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return join(hours, 'h', minutes % 60, 'min');
  return join(Math.floor(hours / 24), 'd', hours % 24, 'h');
}

/** The units' short forms, by the English one. */
const UNIT_WORDS = {
  ms: msg('{n} ms'),
  s: msg('{n} s'),
  min: msg('{n} min'),
  h: msg('{n} h'),
  d: msg('{n} d'),
};

function amount(n, unit, digits = 0) {
  const number = formatter('number', { minimumFractionDigits: digits, maximumFractionDigits: digits }).format(n);
  return t(UNIT_WORDS[unit], { n: number });
}

function join(big, bigUnit, small, smallUnit) {
  return small ? `${amount(big, bigUnit)} ${amount(small, smallUnit)}` : amount(big, bigUnit);
}

/** "in 1 min 5 s", or "due now" once the time has come. */
export function countdown(value, now = new Date()) {
  const left = toDate(value) - toDate(now);
  return left <= 0 ? t('due now') : t('in {duration}', { duration: duration(Math.ceil(left / 1000) * 1000) });
}

/** 0.985 → "98.5%"; null (no attempts) → "—". */
export function percent(rate) {
  return rate === null || rate === undefined ? '—' : percentFormat().format(rate);
}

export function integer(n) {
  return n === null || n === undefined ? '—' : integerFormat().format(n);
}

export function prettyJson(value) {
  return JSON.stringify(value, null, 2);
}

/** JSON with object keys sorted: two values are the same JSON when these are equal. */
export function canonicalJson(value) {
  return JSON.stringify(value, (_, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]]))
      : v,
  );
}

/** A `<input type="datetime-local">` value (local time) as RFC 3339 UTC; '' → null. */
export function localInputToRfc3339(value) {
  if (!value) return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

/** An RFC 3339 time as a `<input type="datetime-local">` value, in local time. */
export function rfc3339ToLocalInput(value) {
  if (!value) return '';
  const date = toDate(value);
  if (Number.isNaN(date.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}
