// i18n.js — the portal's words in the reader's language.
//
// The English text is its own key (as gettext does): the code reads as the
// page does, and another language is one table from those texts to its own
// (locales/he.js). What the server words (explanations, incidents, the
// signature checker) comes in the same language: api.js asks for it with
// `Accept-Language`.
//
// - `t('Status')`, `t('Checked at {time}.', {time})`: a text, its `{name}`s filled.
// - `tn(n, '{n} failure', '{n} failures')`: a count's text; a table gives
//   each of the language's plural forms (Intl.PluralRules: one, two, other…).
// - `tx('since {time}', {time: node})`: the same, as parts for `h()` when a
//   `{name}` is an element.
// - `tc('count', 'Failed')`: a text whose translation depends on where it
//   stands (a delivery that failed, a column counting failures); its key is
//   `count|Failed`.
// - `msg('Pending')`: marks a text kept in a table for `t()` at use (the
//   language is chosen after modules load).
//
// Which language: the app's `portal.language` if set, else the first of the
// browser's languages the portal speaks, else English.

/** The languages the portal speaks: their own names and writing direction. */
export const LANGUAGES = {
  en: { name: 'English', dir: 'ltr' },
  he: { name: 'עברית', dir: 'rtl' },
};

let current = 'en';
let table = {};
let plurals = new Intl.PluralRules('en');

/** The language in use ("en", "he"). */
export function language() {
  return current;
}

/** The portal's language for an app's setting and the browser's languages. */
export function pickLanguage(appLanguage, browserLanguages = []) {
  if (Object.hasOwn(LANGUAGES, appLanguage)) return appLanguage;
  for (const tag of browserLanguages) {
    const base = String(tag).toLowerCase().split('-')[0];
    // "iw" is Hebrew's older code, which some systems still send.
    const known = base === 'iw' ? 'he' : base;
    if (Object.hasOwn(LANGUAGES, known)) return known;
  }
  return 'en';
}

/** Switches to `lang`: loads its table and sets the page's `lang` and `dir`. */
export async function useLanguage(lang) {
  const chosen = Object.hasOwn(LANGUAGES, lang) ? lang : 'en';
  table = chosen === 'en' ? {} : (await import(`./locales/${chosen}.js`)).default;
  current = chosen;
  plurals = new Intl.PluralRules(chosen);
  document.documentElement.lang = chosen;
  document.documentElement.dir = LANGUAGES[chosen].dir;
}

/** Marks `text` for translation where it is stored; `t(text)` translates it at use. */
export function msg(text) {
  return text;
}

/** `text` in the current language, each `{name}` replaced by `params.name`. */
export function t(text, params = {}) {
  const found = table[text];
  return fill(typeof found === 'string' ? found : text, params);
}

/** `text` in a context (`tc('count', 'Failed')`): English is the text, a table's key `context|text`. */
export function tc(context, text, params = {}) {
  const found = table[`${context}|${text}`];
  return fill(typeof found === 'string' ? found : text, params);
}

/**
 * A count's text: `one` for 1 and `other` otherwise in English; a table's
 * entry (under `other`) is an object of the language's plural forms. `{n}`
 * is the count, written in the language's digits.
 */
export function tn(count, one, other, params = {}) {
  const found = table[other];
  const filled = { n: new Intl.NumberFormat(current).format(count), ...params };
  if (found && typeof found === 'object') {
    return fill(found[plurals.select(count)] ?? found.other, filled);
  }
  return fill(count === 1 ? one : other, filled);
}

/** Like `t`, as an array of parts for `h()`: a `{name}` may be an element. */
export function tx(text, params = {}) {
  const found = table[text];
  const template = typeof found === 'string' ? found : text;
  return template.split(/(\{[a-z_]+\})/).flatMap((part) => {
    const name = part.match(/^\{([a-z_]+)\}$/)?.[1];
    if (name && Object.hasOwn(params, name)) {
      const value = params[name];
      return [value instanceof Node ? value : isolate(value)];
    }
    return part ? [part] : [];
  });
}

function fill(template, params) {
  return template.replace(/\{([a-z_]+)\}/g, (whole, name) =>
    Object.hasOwn(params, name) ? isolate(params[name]) : whole,
  );
}

/**
 * A value set into a translated text: in a language other than English it
 * is a Unicode bidi isolate (FSI … PDI), so a URL, an id or a number keeps
 * its own direction inside right-to-left text (and a test can tell data
 * from words).
 */
export function isolate(value) {
  return current === 'en' ? String(value) : `\u2068${value}\u2069`;
}
