// dom.js — building the page without innerHTML.
//
// Everything the portal shows comes from the API, so every string goes into
// the DOM as a text node: nothing it says can become markup or script. `h`
// makes an HTML element, `s` an SVG one (charts); both take attributes and
// children, so a screen reads like the markup it produces.

const SVG_NS = 'http://www.w3.org/2000/svg';

// Set as properties, after the children exist (a <select>'s value needs its options).
const PROPERTIES = new Set(['value', 'checked', 'selected']);

/** An HTML element: `h('a', {href: '#/x', class: 'y'}, 'text', child)`. */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element (namespaced, for inline charts). */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/**
 * Attributes: `null`, `undefined` and `false` are left out, `true` is a bare
 * attribute, a function under `on…` is an event listener (never an attribute:
 * the CSP forbids inline handlers).
 */
function build(el, attrs, children) {
  const properties = [];
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on')) {
      // A string here would be an inline handler: refused by the CSP, and a bug.
      if (typeof value !== 'function') throw new TypeError(`${name} must be a function`);
      el.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (PROPERTIES.has(name)) {
      properties.push([name, value]);
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(el, children);
  for (const [name, value] of properties) el[name] = value;
  return el;
}

/** Appends children: nodes as they are, anything else as text; null/false skipped. */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A unique id for a label/control pair built at run time. */
let nextId = 0;
export function uid(prefix) {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

/**
 * Runs `render` and, if it removed the element that had focus, puts focus on
 * `fallback` (an element, or a function that finds one after the render)
 * instead of letting it drop to <body>: keyboard users would lose their place
 * after an action re-renders the part they were in.
 */
export async function keepingFocus(fallback, render) {
  const before = document.activeElement;
  const result = await render();
  if (before && before !== document.body && !before.isConnected) {
    const target = typeof fallback === 'function' ? fallback() : fallback;
    if (target?.isConnected) target.focus();
  }
  return result;
}
