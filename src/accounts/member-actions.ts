import {
  memberActor,
  type AuditActor,
  type CustomerIdentity,
  type MemberRole,
  type Membership,
  type MembershipLookup,
} from './customer-identity';
import { normalizeEmail, type Member, type MemberPrincipal } from './members';
import { randomBase62 } from '../keys/base62';
import type { AddMemberResult, MemberChangeResult } from '../ports/store';
import type { ActionDeps } from './action-deps';
import { recordChange } from './audit-trail';
import { memberAddedEvent, memberRemovedEvent } from '../webhooks/webhook-events';

/**
 * Member changes as the operator and account owners make them, and the
 * binding of email invitations at sign-in. Every change is audited with who
 * made it. The store applies the last-owner rule and the member limit
 * atomically; these actions never read-then-write a member.
 */

/** Short, secret-free words for the audit detail: the email of an invitation, or the issuer and (URI-encoded) subject. */
export function describePrincipal(principal: MemberPrincipal): string {
  return principal.kind === 'invitation'
    ? `email=${principal.email}`
    : `issuer=${principal.issuer} subject=${encodeURIComponent(principal.subject)}`;
}

export async function addMember(
  deps: ActionDeps,
  actor: AuditActor,
  request: { accountId: string; role: MemberRole; principal: MemberPrincipal },
): Promise<AddMemberResult> {
  const principal: MemberPrincipal =
    request.principal.kind === 'invitation' ? { kind: 'invitation', email: normalizeEmail(request.principal.email) } : request.principal;
  const member: Member = {
    id: `mem_${randomBase62(16)}`,
    accountId: request.accountId,
    role: request.role,
    principal,
    addedAt: new Date(deps.clock.now()).toISOString(),
    addedBy: actor,
  };
  if (principal.kind === 'invitation') member.invitedEmail = principal.email;
  const result = await deps.store.addMember(member, [memberAddedEvent(member, actor, deps.clock.now())]);
  if (result.kind === 'added') {
    await recordChange(deps, {
      action: 'member.add',
      actor,
      accountId: member.accountId,
      memberId: member.id,
      detail: `role=${member.role} ${describePrincipal(principal)}`,
    });
  }
  return result;
}

export async function changeMemberRole(
  deps: ActionDeps,
  actor: AuditActor,
  accountId: string,
  memberId: string,
  role: MemberRole,
): Promise<MemberChangeResult> {
  const result = await deps.store.changeMemberRole(accountId, memberId, role);
  if (result.kind === 'changed') {
    await recordChange(deps, { action: 'member.update', actor, accountId, memberId, detail: `role=${role}` });
  }
  return result;
}

export async function removeMember(deps: ActionDeps, actor: AuditActor, accountId: string, memberId: string): Promise<MemberChangeResult> {
  // The event names the member as it was read; the store appends it only if this call removes it.
  const before = await deps.store.getMember(accountId, memberId);
  if (!before) return { kind: 'member_not_found' };
  const result = await deps.store.removeMember(accountId, memberId, [memberRemovedEvent(before, actor, deps.clock.now())]);
  if (result.kind === 'changed') {
    await recordChange(deps, {
      action: 'member.remove',
      actor,
      accountId,
      memberId,
      detail: `role=${result.member.role} ${describePrincipal(result.member.principal)}`,
    });
  }
  return result;
}

/**
 * What sign-in asks: the person's accounts. Pending invitations for their
 * verified email are bound first (each binding audited as the person's own
 * change), so an invited person sees the account on their first sign-in.
 */
export function memberDirectory(deps: ActionDeps): MembershipLookup {
  return {
    async membershipsOf(identity: CustomerIdentity): Promise<Membership[]> {
      const actor = memberActor(identity);
      for (const binding of await deps.store.bindInvitations(identity, deps.clock.now())) {
        const invitation = binding.kind === 'bound' ? binding.member : binding.invitation;
        await recordChange(deps, {
          action: 'member.bind',
          actor,
          accountId: invitation.accountId,
          memberId: invitation.id,
          detail:
            binding.kind === 'bound'
              ? `role=${binding.member.role} email=${invitation.invitedEmail ?? ''}`
              : `already a member as ${binding.existing.id} (role=${binding.existing.role}); invitation for ${invitation.invitedEmail ?? ''} removed`,
        });
      }
      return deps.store.accountsOf(identity);
    },
    async accountNameOf(accountId: string): Promise<string | undefined> {
      return (await deps.store.getAccount(accountId))?.name;
    },
  };
}
