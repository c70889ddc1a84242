/**
 * What an operator may do through the admin API: one vocabulary of
 * permissions, and one table of which role holds which. Every admin route
 * declares the permission it needs (src/admin/admin-authorization.ts checks
 * it for whoever authenticated); operator API tokens carry permissions from
 * the same vocabulary as their scopes.
 */
export const OPERATOR_PERMISSIONS = [
  'accounts:read',
  'accounts:write',
  'billing:write',
  'keys:read',
  'keys:write',
  'members:read',
  'members:write',
  'audit:read',
  'usage:read',
  'operators:admin',
] as const;
export type OperatorPermission = (typeof OPERATOR_PERMISSIONS)[number];

/**
 * admin: everything. billing: credit, plans (limit and token budget
 * overrides), billing status, spend caps and usage; no keys, members or
 * operators. support: reads accounts, key metadata (never a key), members,
 * the audit trail and usage; changes nothing.
 */
export const OPERATOR_ROLES = ['admin', 'billing', 'support'] as const;
export type OperatorRole = (typeof OPERATOR_ROLES)[number];

export const ROLE_PERMISSIONS: Readonly<Record<OperatorPermission, Readonly<Record<OperatorRole, boolean>>>> = Object.freeze({
  'accounts:read': { admin: true, billing: true, support: true },
  'accounts:write': { admin: true, billing: false, support: false },
  'billing:write': { admin: true, billing: true, support: false },
  'keys:read': { admin: true, billing: false, support: true },
  'keys:write': { admin: true, billing: false, support: false },
  'members:read': { admin: true, billing: false, support: true },
  'members:write': { admin: true, billing: false, support: false },
  'audit:read': { admin: true, billing: false, support: true },
  'usage:read': { admin: true, billing: true, support: true },
  'operators:admin': { admin: true, billing: false, support: false },
});

export function permissionsOfRoles(roles: readonly OperatorRole[]): OperatorPermission[] {
  return OPERATOR_PERMISSIONS.filter((permission) => roles.some((role) => ROLE_PERMISSIONS[permission][role]));
}

export function isOperatorPermission(value: string): value is OperatorPermission {
  return (OPERATOR_PERMISSIONS as readonly string[]).includes(value);
}

/**
 * PATCH /admin/accounts/:id changes billing and non-billing fields in one
 * body, so it needs the permission of each top-level field it sends (and of
 * each `billing` field): a billing operator may change the spend cap but not
 * the account's name or key restrictions.
 */
export const ACCOUNT_PATCH_FIELD_PERMISSIONS: Readonly<Record<string, OperatorPermission>> = Object.freeze({
  name: 'accounts:write',
  maxActiveKeys: 'accounts:write',
  keyRestrictions: 'accounts:write',
  'billing.status': 'billing:write',
  'billing.creditBalance': 'billing:write',
  'billing.monthlySpendCap': 'billing:write',
  limits: 'billing:write',
  tokenBudgets: 'billing:write',
});

/**
 * The permissions a PATCH body needs, from its field names alone (before
 * validation, so a refused caller learns nothing from the body's checks). A
 * field not in the table needs accounts:write; validation then refuses it.
 */
export function accountPatchPermissions(body: unknown): OperatorPermission[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return ['accounts:write'];
  const needed = new Set<OperatorPermission>();
  for (const [field, value] of Object.entries(body as Record<string, unknown>)) {
    if (field === 'billing' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      const names = Object.keys(value);
      if (names.length === 0) needed.add('billing:write');
      for (const name of names) needed.add(ACCOUNT_PATCH_FIELD_PERMISSIONS[`billing.${name}`] ?? 'accounts:write');
    } else {
      needed.add(ACCOUNT_PATCH_FIELD_PERMISSIONS[field] ?? 'accounts:write');
    }
  }
  // An empty body changes nothing, but is still a write to the account.
  if (needed.size === 0) needed.add('accounts:write');
  return [...needed];
}
