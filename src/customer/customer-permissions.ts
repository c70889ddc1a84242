import type { MemberRole } from '../accounts/customer-identity';

/**
 * What a signed-in member may do on an account: one table, role × action.
 * The customer API checks every call against it on the server (the
 * dashboard's hidden buttons are a courtesy, not the control), after the
 * membership itself: someone who is not a member of an account is answered
 * as if it did not exist.
 */
export const CUSTOMER_ACTIONS = [
  'account.read',
  'usage.read',
  'keys.read',
  'keys.create',
  'keys.update',
  'keys.regenerate',
  'keys.revoke',
  'members.read',
  'members.manage',
  'audit.read',
  'webhooks.manage',
] as const;
export type CustomerAction = (typeof CUSTOMER_ACTIONS)[number];

/** owner: keys, members and webhooks (and the audit); developer: keys; viewer: sees keys and usage. */
export const PERMISSIONS: Readonly<Record<CustomerAction, Readonly<Record<MemberRole, boolean>>>> = Object.freeze({
  'account.read': { owner: true, developer: true, viewer: true },
  'usage.read': { owner: true, developer: true, viewer: true },
  'keys.read': { owner: true, developer: true, viewer: true },
  'keys.create': { owner: true, developer: true, viewer: false },
  'keys.update': { owner: true, developer: true, viewer: false },
  'keys.regenerate': { owner: true, developer: true, viewer: false },
  'keys.revoke': { owner: true, developer: true, viewer: false },
  'members.read': { owner: true, developer: false, viewer: false },
  'members.manage': { owner: true, developer: false, viewer: false },
  'audit.read': { owner: true, developer: false, viewer: false },
  'webhooks.manage': { owner: true, developer: false, viewer: false },
});

export function mayPerform(role: MemberRole, action: CustomerAction): boolean {
  return PERMISSIONS[action][role];
}

/** The actions a role may take, in table order: what the dashboard uses to show or hide controls. */
export function actionsOf(role: MemberRole): CustomerAction[] {
  return CUSTOMER_ACTIONS.filter((action) => PERMISSIONS[action][role]);
}
