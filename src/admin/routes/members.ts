import type { FastifyInstance, FastifyReply } from 'fastify';
import { addMember, changeMemberRole, removeMember } from '../../accounts/member-actions';
import type { AddMemberResult, MemberChangeResult } from '../../ports/store';
import { sendAccountNotFound, sendAdminError, sendMemberNotFound } from '../admin-errors';
import { sendInvalidField } from '../../http/api-errors';
import {
  accountIdSchema,
  accountPathParams,
  addMemberBody,
  addMemberBodyShape,
  memberIdSchema,
  memberPathParams,
  patchMemberBody,
  principalOf,
} from '../admin-schemas';
import { describeRoute } from '../../http/openapi';

import type { AdminServerDeps } from '../admin-deps';
import { actorOf } from '../admin-authorization';
import { memberView } from '../admin-views';

type AccountParams = { Params: { id: string } };
type MemberParams = { Params: { id: string; memberId: string } };

/**
 * Account members, managed by the operator: list, add (an identity, or an
 * email invitation that binds on first sign-in), change role, remove. The
 * last-owner rule holds here too: add another owner before removing one.
 */
export function registerMemberRoutes(app: FastifyInstance, deps: AdminServerDeps): void {
  const isAccountId = (id: string) => accountIdSchema.safeParse(id).success;
  const isMemberId = (id: string) => memberIdSchema.safeParse(id).success;
  const tags = ['members'];

  app.get<AccountParams>(
    '/admin/accounts/:id/members',
    {
      config: { permission: 'members:read' },
      schema: describeRoute({ summary: "List an account's members and invitations", tags, params: accountPathParams }),
    },
    async (request, reply) => {
      const members = isAccountId(request.params.id) ? await deps.store.listMembers(request.params.id) : null;
      if (!members) return sendAccountNotFound(reply, request.params.id);
      return reply.send({ members: members.map(memberView) });
    },
  );

  app.post<AccountParams>(
    '/admin/accounts/:id/members',
    {
      config: { permission: 'members:write' },
      schema: describeRoute({ summary: 'Add a member, or invite one by email', tags, params: accountPathParams, body: addMemberBodyShape }),
    },
    async (request, reply) => {
      const body = addMemberBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      const accountId = request.params.id;
      if (!isAccountId(accountId)) return sendAccountNotFound(reply, accountId);
      const result = await addMember(deps, actorOf(request), { accountId, role: body.data.role, principal: principalOf(body.data) });
      return sendAddResult(reply, accountId, result);
    },
  );

  app.patch<MemberParams>(
    '/admin/accounts/:id/members/:memberId',
    {
      config: { permission: 'members:write' },
      schema: describeRoute({ summary: "Change a member's role", tags, params: memberPathParams, body: patchMemberBody }),
    },
    async (request, reply) => {
      const { id, memberId } = request.params;
      const body = patchMemberBody.safeParse(request.body ?? {});
      if (!body.success) return sendInvalidField(reply, body.error);
      if (!isAccountId(id) || !isMemberId(memberId)) return sendMemberNotFound(reply, id, memberId);
      return sendChangeResult(reply, id, memberId, await changeMemberRole(deps, actorOf(request), id, memberId, body.data.role));
    },
  );

  app.delete<MemberParams>(
    '/admin/accounts/:id/members/:memberId',
    {
      config: { permission: 'members:write' },
      schema: describeRoute({ summary: 'Remove a member or an invitation', tags, params: memberPathParams }),
    },
    async (request, reply) => {
      const { id, memberId } = request.params;
      if (!isAccountId(id) || !isMemberId(memberId)) return sendMemberNotFound(reply, id, memberId);
      return sendChangeResult(reply, id, memberId, await removeMember(deps, actorOf(request), id, memberId));
    },
  );
}

function sendAddResult(reply: FastifyReply, accountId: string, result: AddMemberResult): FastifyReply {
  switch (result.kind) {
    case 'added':
      return reply.code(201).send(memberView(result.member));
    case 'account_not_found':
      return sendAccountNotFound(reply, accountId, 'Create it first.');
    case 'already_member':
      return sendAdminError(
        reply,
        409,
        'member_exists',
        `That person is already ${result.member.principal.kind === 'invitation' ? 'invited to' : 'a member of'} account '${accountId}' ` +
          `as '${result.member.id}' (role ${result.member.role}). Change the role with PATCH /admin/accounts/${accountId}/members/${result.member.id}.`,
      );
    case 'member_limit_reached':
      return sendAdminError(
        reply,
        409,
        'member_limit_reached',
        `Account '${accountId}' already has ${result.limit} members and invitations, the most an account can have. Remove some first.`,
      );
  }
}

function sendChangeResult(reply: FastifyReply, accountId: string, memberId: string, result: MemberChangeResult): FastifyReply {
  switch (result.kind) {
    case 'changed':
      return reply.send(memberView(result.member));
    case 'member_not_found':
      return sendMemberNotFound(reply, accountId, memberId);
    case 'last_owner':
      return sendAdminError(
        reply,
        409,
        'last_owner',
        `Member '${memberId}' is the last owner of account '${accountId}', and an account keeps at least one owner. ` +
          'Make another member owner first. Nothing was changed.',
      );
  }
}
