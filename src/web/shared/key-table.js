// @ts-check
/**
 * The key table both dashboard pages show (markup: each page's #keys-table, with the same ids). Each cell names its column in data-label,
 * which the narrow layout shows in place of the header.
 */
import { byId, el, replaceContent, timeElement } from './dom.js';
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
      keyCell('actions-cell', '', ...options.actions(key)),
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
      replaceContent(body, ...keys.map((key) => row(key, keysById)));
    },
  };
}
