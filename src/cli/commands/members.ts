import { Command, Option } from 'commander';
import type { ApiMember, ApiMemberList } from '../api-types';
import { accountPath, callApi, withJson, type JsonFlag } from '../command-kit';
import { emailOption, issuerOption, memberRoleOption, subjectOption } from '../option-parsers';
import { cell, emit, renderKeyValue, renderTable, shortTime, type Column } from '../output';

const memberPath = (accountId: string, memberId: string) => `${accountPath(accountId)}/members/${encodeURIComponent(memberId)}`;

/** Who a member is: the invited email, or the identity provider's issuer and subject (with the email it was invited by, if any). */
export function whoText(member: ApiMember): string {
  if (member.issuer === null || member.subject === null) return member.email ?? '';
  const identity = `${member.subject} @ ${member.issuer}`;
  return member.email ? `${member.email} (${identity})` : identity;
}

export const MEMBER_COLUMNS: readonly Column<ApiMember>[] = [
  { header: 'ID', value: (member) => member.id },
  { header: 'ROLE', value: (member) => member.role },
  { header: 'STATUS', value: (member) => member.status },
  { header: 'WHO', value: whoText },
  { header: 'ADDED', value: (member) => shortTime(member.addedAt) },
  { header: 'BY', value: (member) => (member.addedBy.kind === 'operator' ? 'operator' : member.addedBy.subject) },
];

export function renderMemberList(accountId: string, list: ApiMemberList): string {
  return list.members.length === 0 ? `Account ${cell(accountId)} has no members.\n` : renderTable(MEMBER_COLUMNS, list.members);
}

export function renderMember(member: ApiMember): string {
  return renderKeyValue([
    ['id', member.id],
    ['account', member.accountId],
    ['role', member.role],
    ['status', member.status === 'invited' ? 'invited (binds when that email first signs in)' : 'active'],
    ['email', member.email ?? undefined],
    ['issuer', member.issuer ?? undefined],
    ['subject', member.subject ?? undefined],
    ['added', member.addedAt],
    ['added by', member.addedBy.kind === 'operator' ? 'operator' : `${member.addedBy.subject} @ ${member.addedBy.issuer}`],
    ['joined', member.joinedAt ?? undefined],
  ]);
}

export function membersCommand(): Command {
  const members = new Command('members').description(
    "manage who may use an account's customer dashboard, and in which role (owner, developer, viewer)",
  );

  withJson(
    members.command('list').description("list an account's members and invitations").requiredOption('--account <id>', 'account id'),
  ).action(async (options: JsonFlag & { account: string }) => {
    const list = await callApi<ApiMemberList>('GET', `${accountPath(options.account)}/members`);
    emit(options, list, (answer) => renderMemberList(options.account, answer));
  });

  withJson(
    members
      .command('add')
      .description('add a person by their identity (issuer and subject), or invite a verified email that binds on first sign-in')
      .requiredOption('--account <id>', 'account id')
      .requiredOption('--role <role>', 'owner (keys and members), developer (keys) or viewer (sees keys and usage)', memberRoleOption)
      .addOption(new Option('--email <address>', 'invite this email address').argParser(emailOption).conflicts(['issuer', 'subject']))
      .option('--issuer <url>', "the identity provider's issuer URL, such as https://login.example.com", issuerOption)
      .option('--subject <sub>', "the person's subject (sub claim) at that issuer", subjectOption),
  ).action(
    async (options: JsonFlag & { account: string; role: string; email?: string; issuer?: string; subject?: string }, command: Command) => {
      if (options.email === undefined && (options.issuer === undefined || options.subject === undefined)) {
        command.error('error: give --email, or both --issuer and --subject');
      }
      const who = options.email !== undefined ? { email: options.email } : { issuer: options.issuer, subject: options.subject };
      const member = await callApi<ApiMember>('POST', `${accountPath(options.account)}/members`, { role: options.role, ...who });
      emit(
        options,
        member,
        (answer) =>
          `${answer.status === 'invited' ? 'Invited' : 'Added'} ${cell(whoText(answer))} to account ${cell(answer.accountId)} as ${answer.role}.\n\n${renderMember(answer)}`,
      );
    },
  );

  withJson(
    members
      .command('role')
      .description("change a member's role (an account keeps at least one owner)")
      .requiredOption('--account <id>', 'account id')
      .requiredOption('--id <member-id>', 'member id (mem_…, see members list)')
      .requiredOption('--role <role>', 'owner, developer or viewer', memberRoleOption),
  ).action(async (options: JsonFlag & { account: string; id: string; role: string }) => {
    emit(options, await callApi<ApiMember>('PATCH', memberPath(options.account, options.id), { role: options.role }), renderMember);
  });

  withJson(
    members
      .command('remove')
      .description('remove a member or an invitation (an account keeps at least one owner)')
      .requiredOption('--account <id>', 'account id')
      .requiredOption('--id <member-id>', 'member id (mem_…, see members list)'),
  ).action(async (options: JsonFlag & { account: string; id: string }) => {
    const removed = await callApi<ApiMember>('DELETE', memberPath(options.account, options.id));
    emit(options, removed, (answer) => `Removed ${cell(whoText(answer))} (${cell(answer.id)}) from account ${cell(answer.accountId)}.\n`);
  });

  return members;
}
