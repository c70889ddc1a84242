// @ts-check
/**
 * The operator page's audit section: GET /admin/audit across accounts, filtered by account, actor, action and time,
 * newest first, with "Older" paging. Shown to operators with audit:read. Every value from the API goes in as text.
 */
import { ApiError, isObject } from '../shared/api.js';
import { byId, el, replaceContent, timeElement } from '../shared/dom.js';

/** @typedef {import('../../ports/store').AuditTrailEntry} AuditEntry */
/** @typedef {(method: string, path: string) => Promise<unknown>} Get */

/**
 * Who made a change, as the audit names them: a person (subject @ issuer), a token (name and id), break-glass, or a member.
 * @param {AuditEntry['actor']} actor
 */
export function actorText(actor) {
  if (actor.kind === 'member') return `member ${actor.subject}`;
  const operator = actor.operator;
  if (!operator) return 'an operator';
  if (operator.kind === 'break-glass') return 'break-glass ADMIN_TOKEN';
  if (operator.kind === 'secret-scanning') return `${operator.reporter === 'github' ? 'GitHub' : operator.reporter} secret scanning`;
  if (operator.kind === 'token') return `token “${operator.name}” (${operator.tokenId})`;
  return `${operator.subject} @ ${operator.issuer}`;
}

/**
 * What a change was made to: an account (and key), or, at operator level, an operator token (name and id).
 * @param {AuditEntry} entry
 */
function targetText(entry) {
  if (entry.accountId !== undefined) return `on ${entry.accountId}${entry.keyPrefix ? ` (${entry.keyPrefix}…)` : ''}`;
  return `of token “${entry.operatorTokenName}” (${entry.operatorTokenId})`;
}

/**
 * @param {{ get: Get, failed: (error: unknown) => void }} deps
 */
export function auditSection(deps) {
  const ui = {
    section: byId('audit-section', HTMLElement),
    form: byId('audit-form', HTMLFormElement),
    account: byId('audit-account', HTMLInputElement),
    actor: byId('audit-actor', HTMLInputElement),
    action: byId('audit-action', HTMLSelectElement),
    from: byId('audit-from', HTMLInputElement),
    to: byId('audit-to', HTMLInputElement),
    list: byId('audit-list', HTMLElement),
    older: byId('audit-older', HTMLButtonElement),
  };
  /** @type {string | null} */
  let next = null;

  function query() {
    const params = new URLSearchParams({ limit: '50' });
    if (ui.account.value.trim()) params.set('accountId', ui.account.value.trim());
    if (ui.actor.value.trim()) params.set('actor', ui.actor.value.trim());
    if (ui.action.value) params.set('action', ui.action.value);
    // As typed: the API checks the time and names the field when it is not ISO-8601 with a zone.
    if (ui.from.value.trim()) params.set('from', ui.from.value.trim());
    if (ui.to.value.trim()) params.set('to', ui.to.value.trim());
    return params;
  }

  /** @param {boolean} more */
  async function load(more) {
    const params = query();
    if (more && next) params.set('before', next);
    const data = await deps.get('GET', `/admin/audit?${params.toString()}`);
    if (!isObject(data) || !Array.isArray(data.entries)) throw new ApiError(0, '', "The admin API's answer has no 'entries' list.");
    const entries = /** @type {AuditEntry[]} */ (data.entries);
    next = typeof data.next === 'string' ? data.next : null;
    const items = entries.map((entry) =>
      el(
        'li',
        { data: { testid: 'audit-entry' } },
        timeElement(entry.time),
        ` ${entry.action} ${targetText(entry)}, by ${actorText(entry.actor)}`,
      ),
    );
    if (more) ui.list.append(...items);
    else replaceContent(ui.list, ...(items.length > 0 ? items : [el('li', { className: 'muted' }, 'No entries match.')]));
    ui.older.hidden = next === null;
  }

  ui.form.addEventListener('submit', (event) => {
    event.preventDefault();
    load(false).catch(deps.failed);
  });
  ui.older.addEventListener('click', () => {
    load(true).catch(deps.failed);
  });

  return {
    /** @param {boolean} visible */
    async show(visible) {
      ui.section.hidden = !visible;
      if (visible) await load(false);
    },
  };
}
