// @ts-check
/**
 * The key table both dashboard pages show (markup: each page's #keys-table, with the same ids). Each cell names its column in data-label,
 * which the narrow layout shows in place of the header.
 */
import { ApiError } from './api.js';
import { byId, el, replaceContent, showError, timeElement } from './dom.js';
import { displayPrefix } from './key-format.js';

/**
 * What the table, the notices and the dialogs use of a key: fields of both APIs' key views.
 * @typedef {object} ShownKey
 * @property {string} id
 * @property {string} prefix
 * @property {string} name
 * @property {string} environment
 * @property {string} status  'active', 'expired' or 'revoked'
 * @property {string} createdAt
 * @property {string | null} [lastUsedAt]
 * @property {string | null} expiresAt
 * @property {string | null} [revokedAt]
 * @property {string | null} [revokeAt]  the end of a regeneration's grace period
 * @property {string | null} [replaces]
 * @property {string | null} [replacedBy]
 */

/**
 * @param {string} className
 * @param {string} label  the column's name, for the narrow layout
 * @param {...import('./dom.js').Child} children
 */
export function keyCell(className, label, ...children) {
  return el('td', { className, data: { label } }, ...children);
}

/**
 * @template {ShownKey} K
 * @typedef {object} KeyTableOptions
 * @property {string} graceNote  the status note of a key in its grace period, in the page's words
 * @property {(key: K) => HTMLTableCellElement[]} extraCells  the page's own columns, after "Expires"
 * @property {(key: K) => import('./dom.js').Child[]} actions  the row's buttons
 */

/**
 * @template {ShownKey} K
 * @param {KeyTableOptions<K>} options
 */
export function keyTable(options) {
  const caption = byId('keys-caption', HTMLElement);
  const body = byId('keys-body', HTMLElement);
  /** Shown when an account is chosen and has no keys. */
  const noKeys = byId('no-keys', HTMLElement);
  /** Each shown row's error region, by key id: rows with buttons only. */
  /** @type {Map<string, HTMLElement>} */
  const rowErrors = new Map();

  /**
   * @param {K} key
   * @param {Map<string, K>} byId
   */
  function row(key, byId) {
    /** @param {string} id */
    const prefixOf = (id) => {
      const other = byId.get(id);
      return other ? displayPrefix(other) : id;
    };
    /** @param {string} text */
    const note = (text) => el('span', { className: 'note' }, text);
    const actions = options.actions(key);
    // Present (empty) from the start: a live region that exists before its text changes is announced reliably.
    const errorRegion = actions.some(Boolean) && el('div', { className: 'alert row-alert', data: { testid: 'row-error' } });
    if (errorRegion) {
      errorRegion.setAttribute('role', 'alert');
      rowErrors.set(key.id, errorRegion);
    }

    const status = keyCell(
      'status',
      'Status',
      el('span', { className: `badge status-${key.status}` }, key.status),
      key.status === 'active' && key.revokeAt && note(options.graceNote),
      key.status === 'revoked' && key.revokedAt && el('span', { className: 'note' }, 'revoked ', timeElement(key.revokedAt)),
      key.replacedBy && note(`replaced by ${prefixOf(key.replacedBy)}`),
      key.replaces && note(`replaces ${prefixOf(key.replaces)}`),
    );

    const expires = keyCell(
      'expires',
      'Expires',
      key.expiresAt && timeElement(key.expiresAt),
      key.expiresAt && key.revokeAt && el('br'),
      key.revokeAt && timeElement(key.revokeAt),
      key.revokeAt && note('end of grace period'),
      !key.expiresAt && !key.revokeAt && (key.status === 'active' ? 'never' : '—'),
    );

    return el(
      'tr',
      { data: { testid: 'key-row', keyId: key.id, status: key.status } },
      keyCell('prefix', 'Prefix', el('code', {}, displayPrefix(key))),
      keyCell('name', 'Name', key.name),
      keyCell('environment', 'Environment', el('span', { className: `badge env-${key.environment}` }, key.environment)),
      status,
      keyCell('created', 'Created', timeElement(key.createdAt)),
      keyCell('last-used', 'Last used', key.lastUsedAt ? timeElement(key.lastUsedAt) : 'never'),
      expires,
      ...options.extraCells(key),
      keyCell('actions-cell', '', ...actions, errorRegion),
    );
  }

  return {
    /**
     * @param {string | undefined} accountName  undefined: no account chosen
     * @param {K[]} keys  in the order shown
     */
    render(accountName, keys) {
      replaceContent(caption, accountName !== undefined ? `Keys of ${accountName}` : 'Keys');
      noKeys.hidden = !(accountName !== undefined && keys.length === 0);
      const keysById = new Map(keys.map((key) => [key.id, key]));
      rowErrors.clear();
      replaceContent(body, ...keys.map((key) => row(key, keysById)));
    },
    /**
     * Runs a change to one key so that its error shows in that key's row, beside the buttons that started it, rather
     * than at the top of a long page, out of view. A refused session or token (401) still goes to the page (it signs
     * out), and so does an error about a row that is no longer shown.
     * @param {ShownKey} key
     * @param {() => Promise<unknown>} change
     * @returns {Promise<boolean>}  whether the change succeeded
     */
    async inRow(key, change) {
      for (const region of rowErrors.values()) replaceContent(region);
      try {
        await change();
        return true;
      } catch (error) {
        const region = rowErrors.get(key.id);
        if (!region || (error instanceof ApiError && error.status === 401)) throw error;
        showError(region, error);
        region.scrollIntoView({ block: 'nearest' });
        return false;
      }
    },
  };
}
