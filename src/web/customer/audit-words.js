// @ts-check
/**
 * The audit trail in words (issue 38 §6): each action code and its `name=value` details as a sentence a customer
 * reads, never the raw codes. An action this page does not know yet is shown as its code, so nothing is hidden.
 */

/** @typedef {import('../../customer/customer-views').CustomerAuditEntryView} AuditEntry */

/** `a=1 b=two` → { a: '1', b: 'two' }; a value may hold `=` (JSON restrictions), and runs to the next ` name=`. */
export function detailFields(/** @type {string | null} */ detail) {
  /** @type {Record<string, string>} */
  const fields = {};
  if (!detail) return fields;
  const names = [...detail.matchAll(/(?:^| )([A-Za-z]+)=/g)];
  names.forEach((match, i) => {
    const start = (match.index ?? 0) + match[0].length;
    const end = i + 1 < names.length ? (names[i + 1]?.index ?? detail.length) : detail.length;
    fields[match[1] ?? ''] = detail.slice(start, end);
  });
  return fields;
}

/** @type {Readonly<Record<string, string>>} */
const FIELD_WORDS = {
  name: 'name',
  expiresAt: 'expiry',
  restrictions: 'restrictions',
  limits: 'limits',
  tokenBudgets: 'token budgets',
  monthlySpendCap: 'monthly spend cap',
};

/** @type {Readonly<Record<string, string>>} */
const WEBHOOK_FIELD_WORDS = { url: 'URL', description: 'description', events: 'events', enabled: 'state' };

/** `{"endpoints":["/v1/embeddings"],"readOnly":true}` → `endpoints /v1/embeddings; read-only`. */
function restrictionWords(/** @type {string} */ text) {
  if (text === 'none') return 'none';
  try {
    /** @type {unknown} */
    const parsed = JSON.parse(text);
    const value = /** @type {{ endpoints?: string[], readOnly?: boolean, models?: string[], sourceAddresses?: string[] }} */ (parsed);
    const parts = [
      value.endpoints && `endpoints ${value.endpoints.join(', ')}`,
      value.readOnly && 'read-only',
      value.models && `models ${value.models.join(', ')}`,
      value.sourceAddresses && `source addresses ${value.sourceAddresses.join(', ')}`,
    ].filter(Boolean);
    return parts.length === 0 ? 'none' : parts.join('; ');
  } catch {
    return text;
  }
}

/** Who a member entry names: the invited email, or the identity's subject. */
function memberWords(/** @type {Record<string, string>} */ fields, /** @type {string | null} */ memberId) {
  if (fields.email) return fields.email;
  if (fields.subject) return decodeURIComponent(fields.subject);
  return memberId ?? 'a member';
}

/**
 * One audit entry as a sentence, without who or when (the page shows those beside it). `money` shows an amount the
 * entry records in the currency's units ("$0.0025").
 * @param {AuditEntry} entry
 * @param {(units: number) => string} money
 */
export function auditSentence(entry, money) {
  const key = entry.keyPrefix ? `key ${entry.keyPrefix}…` : 'a key';
  const fields = detailFields(entry.detail);
  switch (entry.action) {
    case 'key.create':
      return `Created ${key}`;
    case 'key.revoke':
      return `Revoked ${key}`;
    case 'key.rotate': {
      const grace = Number(fields.graceSeconds ?? '0');
      const fate = grace > 0 ? `the old one kept working for ${grace} seconds` : 'the old one stopped at once';
      return `Regenerated ${key} as ${fields.newKeyPrefix ? `${fields.newKeyPrefix}…` : 'a new key'}; ${fate}`;
    }
    case 'key.update': {
      const changed = (fields.changes ?? '')
        .split(',')
        .filter(Boolean)
        .map((field) => FIELD_WORDS[field] ?? field);
      const restrictions = fields.restrictions === undefined ? '' : ` (restrictions now: ${restrictionWords(fields.restrictions)})`;
      return `Changed the ${changed.join(', ') || 'settings'} of ${key}${restrictions}`;
    }
    case 'member.add':
      return `Added ${memberWords(fields, entry.memberId)} as ${fields.role ?? 'member'}`;
    case 'member.bind':
      return `${memberWords(fields, entry.memberId)} accepted the invitation (${fields.role ?? 'member'})`;
    case 'member.update':
      return `Changed the role of ${memberWords(fields, entry.memberId)} to ${fields.role ?? 'another role'}`;
    case 'member.remove':
      return `Removed ${memberWords(fields, entry.memberId)}`;
    case 'key.exposed': {
      const where = fields.url && fields.url !== 'none' ? ` at ${fields.url}` : '';
      const done =
        fields.handled === 'rotated'
          ? 'regenerated it, the old key working for one more hour'
          : fields.handled === 'already_revoked'
            ? 'it was already revoked'
            : 'revoked it';
      return `${key} was found exposed${where}; ${done}`;
    }
    case 'webhook.create':
      return `Added a webhook endpoint${fields.events ? ` for ${fields.events.split(',').join(', ')}` : ''}`;
    case 'webhook.update':
      if (fields.creditLowThreshold !== undefined) {
        return fields.creditLowThreshold === 'none'
          ? 'Turned off credit.low events'
          : `Set credit.low to be sent below ${money(Number(fields.creditLowThreshold))}`;
      }
      if (fields.enabled !== undefined) return `Turned ${fields.enabled === 'true' ? 'on' : 'off'} a webhook endpoint`;
      if (fields.events !== undefined) return `Set a webhook endpoint's events to ${fields.events.split(',').join(', ')}`;
      return `Changed the ${(fields.changes ?? 'settings')
        .split(',')
        .map((field) => WEBHOOK_FIELD_WORDS[field] ?? field)
        .join(', ')} of a webhook endpoint`;
    case 'webhook.delete':
      return 'Deleted a webhook endpoint';
    case 'webhook.rotate_secret':
      return "Replaced a webhook endpoint's signing secret";
    case 'account.create':
      return 'Created the account';
    case 'account.update':
      return 'Changed the account settings';
    case 'account.credit':
      return 'Adjusted the credit';
    default:
      return entry.action;
  }
}
