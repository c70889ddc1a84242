// @ts-check
/**
 * Safe DOM building for the dashboard pages. Every string handed to these helpers becomes a text node (or the value of a
 * fixed, harmless attribute), never markup: a key named `<img src=x onerror=alert(1)>` shows as exactly that.
 * The pages build everything they show with these helpers; nothing assigns innerHTML (the lint config forbids it).
 */
import { ApiError } from './api.js';

/** @typedef {Node | string | null | undefined | false} Child  A string becomes a text node; null, undefined and false are left out. */

/**
 * @typedef {object} ElementOptions
 * @property {string} [className]
 * @property {string} [label]  the accessible name (aria-label), for a control whose visible text is not enough on its own
 * @property {string} [title]
 * @property {Record<string, string>} [data]  data-* attributes
 */

/**
 * A new element with the given children (strings as text).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {ElementOptions} [options]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, options = {}, ...children) {
  const element = document.createElement(tag);
  if (options.className) element.className = options.className;
  if (options.label) element.setAttribute('aria-label', options.label);
  if (options.title) element.title = options.title;
  for (const [name, value] of Object.entries(options.data ?? {})) element.dataset[name] = value;
  append(element, ...children);
  return element;
}

/**
 * A `<button type="button">` that runs `onClick`.
 * @param {string} text
 * @param {ElementOptions} options
 * @param {() => void} onClick
 * @returns {HTMLButtonElement}
 */
export function button(text, options, onClick) {
  const element = el('button', options, text);
  element.type = 'button';
  element.addEventListener('click', onClick);
  return element;
}

/**
 * @param {Node} parent
 * @param {...Child} children
 */
export function append(parent, ...children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
}

/**
 * Replaces everything inside `parent` (no children given: empties it).
 * @param {Node} parent
 * @param {...Child} children
 */
export function replaceContent(parent, ...children) {
  parent.textContent = '';
  append(parent, ...children);
}

/**
 * The page's element with this id, of the expected kind; a page whose markup lacks it fails at once and says which.
 * @template {HTMLElement} T
 * @param {string} id
 * @param {{ new (): T, prototype: T }} kind
 * @returns {T}
 */
export function byId(id, kind) {
  const element = document.getElementById(id);
  if (!(element instanceof kind)) throw new Error(`The page has no element #${id} of the expected kind.`);
  return element;
}

/**
 * A `<time>` showing an ISO timestamp as "YYYY-MM-DD HH:MM UTC" (the full value in its title); a value that is not a
 * date is shown as it came.
 * @param {string} iso
 * @returns {HTMLTimeElement}
 */
export function timeElement(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return el('time', {}, iso);
  const exact = date.toISOString();
  const element = el('time', { title: exact }, `${exact.slice(0, 16).replace('T', ' ')} UTC`);
  element.dateTime = exact;
  return element;
}

/**
 * Shows an error in a region (role="alert", so it is announced): an ApiError's message, then its HTTP status, code and
 * field in a quieter detail.
 * @param {HTMLElement} region
 * @param {unknown} error
 */
export function showError(region, error) {
  if (!(error instanceof ApiError)) {
    replaceContent(region, `Unexpected error: ${error instanceof Error ? error.message : String(error)}`);
    return;
  }
  const parts = [];
  if (error.status) parts.push(`HTTP ${error.status}`);
  if (error.code) parts.push(error.code);
  if (error.field) parts.push(`field: ${error.field}`);
  replaceContent(region, error.message, parts.length > 0 && el('span', { className: 'detail' }, ` (${parts.join(', ')})`));
}

/**
 * The page's two message regions: errors (role="alert") and notices (role="status"). Showing one empties the other.
 * @param {HTMLElement} errorRegion
 * @param {HTMLElement} noticeRegion
 */
export function messageRegions(errorRegion, noticeRegion) {
  return {
    clear() {
      replaceContent(errorRegion);
      replaceContent(noticeRegion);
    },
    /** @param {unknown} error */
    error(error) {
      replaceContent(noticeRegion);
      showError(errorRegion, error);
    },
    /** @param {string} text */
    notice(text) {
      replaceContent(errorRegion);
      replaceContent(noticeRegion, text);
    },
  };
}
