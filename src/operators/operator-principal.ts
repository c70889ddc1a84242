import type { OperatorActor } from '../accounts/customer-identity';
import { OPERATOR_PERMISSIONS, permissionsOfRoles, type OperatorPermission, type OperatorRole } from './operator-permissions';

/**
 * Who is calling the admin API, once authenticated: the break-glass
 * ADMIN_TOKEN (every permission), an operator API token (its scopes), or a
 * person signed in to the operator dashboard (their roles' permissions).
 */
export type OperatorPrincipal =
  | { kind: 'break-glass' }
  | { kind: 'token'; tokenId: string; name: string; scopes: readonly OperatorPermission[] }
  | { kind: 'person'; issuer: string; subject: string; displayName?: string; roles: readonly OperatorRole[] };

export function permissionsOf(principal: OperatorPrincipal): readonly OperatorPermission[] {
  switch (principal.kind) {
    case 'break-glass':
      return OPERATOR_PERMISSIONS;
    case 'token':
      return principal.scopes;
    case 'person':
      return permissionsOfRoles(principal.roles);
  }
}

/** How the audit trail names the principal: never a token or a role, only who. */
export function operatorActorOf(principal: OperatorPrincipal): OperatorActor {
  switch (principal.kind) {
    case 'break-glass':
      return { kind: 'break-glass' };
    case 'token':
      return { kind: 'token', tokenId: principal.tokenId, name: principal.name };
    case 'person':
      return { kind: 'person', issuer: principal.issuer, subject: principal.subject };
  }
}
