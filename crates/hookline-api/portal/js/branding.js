// branding.js — the provider's look: name, logo, brand colours (light and
// dark), typeface and theme.
//
// Everything is set through the DOM and CSSOM (never a style attribute in
// markup, which the CSP forbids). The brand colour only tints accents; text
// on it gets black or white, whichever contrasts more, so any colour a
// provider picks stays readable (the worse of the two is still above 4.5:1).
// The app's own name is marked translate="no" (a browser's page translation
// leaves it as it is); without one, the default name is in the reader's language.

import { t } from './i18n.js';

const HEX_COLOUR = /^#[0-9a-fA-F]{6}$/;
const THEMES = new Set(['light', 'dark']);

/** The name the portal goes by: the portal's display name, else the app's name. */
export function portalName(app) {
  return app?.portal?.display_name || app?.name || t('Webhooks portal');
}

/** Applies `app.portal` (all of it optional) to the page. */
export function applyBranding(app) {
  const portal = app.portal ?? {};
  const name = document.getElementById('brand-name');
  name.textContent = portalName(app);
  if (portal.display_name || app.name) name.setAttribute('translate', 'no');
  else name.removeAttribute('translate');
  showLogo(portal.logo_url);
  applyColour(portal.brand_color, portal.brand_color_dark);
  applyFont(portal.font);
  applyTheme(portal.theme);
}

/** Font stacks of fonts systems already have (the CSP loads none). */
const FONTS = {
  humanist: "Seravek, 'Gill Sans Nova', Ubuntu, Calibri, 'DejaVu Sans', source-sans-pro, sans-serif",
  serif: "Charter, 'Bitstream Charter', 'Sitka Text', Cambria, serif",
  rounded: "ui-rounded, 'Hiragino Maru Gothic ProN', Quicksand, Comfortaa, Manjari, 'Arial Rounded MT', 'Arial Rounded MT Bold', Calibri, source-sans-pro, sans-serif",
};

function applyFont(font) {
  const stack = Object.hasOwn(FONTS, font) ? FONTS[font] : null;
  if (stack) document.documentElement.style.setProperty('--font', stack);
}

function showLogo(url) {
  const logo = document.getElementById('brand-logo');
  // Only https: the CSP allows those images, and a page served over https should not mix.
  if (typeof url !== 'string' || !url.startsWith('https://')) return;
  // The name is written beside it, so the logo is decorative (alt="").
  logo.addEventListener('error', () => {
    logo.hidden = true;
  });
  logo.src = url;
  logo.hidden = false;
}

function applyColour(colour, darkColour) {
  if (typeof colour !== 'string' || !HEX_COLOUR.test(colour)) return;
  const root = document.documentElement.style;
  // On the dark page, the dark-mode colour if the app has one, else the brand
  // colour; a colour too dark there would leave a button no edge: it is
  // lightened until it stands out (3:1, WCAG 1.4.11).
  const forDark = typeof darkColour === 'string' && HEX_COLOUR.test(darkColour) ? darkColour : colour;
  const dark = standingOut(forDark, DARK_BACKGROUND, 3);
  root.setProperty('--brand', `light-dark(${colour}, ${dark})`);
  root.setProperty('--on-brand', `light-dark(${readableOn(colour)}, ${readableOn(dark)})`);
}

/**
 * The lightest dark background a button sits on (`--raised` in portal.css;
 * the page's `--bg` and panels' `--surface` are darker, so 3:1 here is 3:1 there).
 */
const DARK_BACKGROUND = '#1d222a';

/** `hex`, mixed with white in steps until it contrasts `ratio`:1 with `background`. */
export function standingOut(hex, background, ratio) {
  const back = relativeLuminance(background);
  const contrast = (h) => {
    const l = relativeLuminance(h);
    return (Math.max(l, back) + 0.05) / (Math.min(l, back) + 0.05);
  };
  let colour = hex;
  for (let step = 1; step <= 20 && contrast(colour) < ratio; step += 1) {
    colour = mixWithWhite(hex, step / 20);
  }
  return colour;
}

function mixWithWhite(hex, share) {
  const channel = (i) => {
    const c = parseInt(hex.slice(i, i + 2), 16);
    return Math.round(c + (255 - c) * share)
      .toString(16)
      .padStart(2, '0');
  };
  return `#${channel(1)}${channel(3)}${channel(5)}`;
}

/** "light" or "dark" pin the theme; "system" (or nothing) follows prefers-color-scheme in CSS. */
function applyTheme(theme) {
  if (THEMES.has(theme)) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

/** Black or white, whichever contrasts more with `hex` (WCAG relative luminance). */
export function readableOn(hex) {
  const luminance = relativeLuminance(hex);
  const withWhite = 1.05 / (luminance + 0.05);
  const withBlack = (luminance + 0.05) / 0.05;
  return withBlack >= withWhite ? '#000000' : '#ffffff';
}

function relativeLuminance(hex) {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
