/**
 * The fields of a key as both HTTP APIs answer with it (src/http/api-views.ts, CommonKeyView), sorted: the tests of
 * either API compare an answer's fields with these, so a field added by mistake (a hash, the key) shows up.
 */
export const COMMON_KEY_VIEW_FIELDS = [
  'createdAt',
  'createdBy',
  'environment',
  'expiresAt',
  'id',
  'lastUsedAt',
  'name',
  'prefix',
  'replacedBy',
  'replaces',
  'restrictions',
  'revokeAt',
  'revokedAt',
  'status',
];

/** The admin API's key view adds the account, the key's limit and token budget overrides and its spend cap. */
export const ADMIN_KEY_VIEW_FIELDS = [
  ...COMMON_KEY_VIEW_FIELDS,
  'accountId',
  'limits',
  'monthlySpendCap',
  'monthlySpendCapFormatted',
  'tokenBudgets',
].sort();
