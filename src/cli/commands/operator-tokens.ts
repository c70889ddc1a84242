import { Command } from 'commander';
import { callApi, withJson, type JsonFlag } from '../command-kit';
import { cell, emit, renderKeyValue, renderTable, shortTime, type Column } from '../output';
import { OPERATOR_PERMISSIONS, isOperatorPermission } from '../../operators/operator-permissions';
import { OPERATOR_TOKEN_MAX_DAYS } from '../../operators/operator-token';
import type { ApiOperatorToken, ApiOperatorTokenList, ApiCreatedOperatorToken } from '../api-types';
import { InvalidArgumentError } from 'commander';

const COLUMNS: readonly Column<ApiOperatorToken>[] = [
  { header: 'ID', value: (token) => token.id },
  { header: 'NAME', value: (token) => token.name },
  { header: 'PREFIX', value: (token) => token.displayPrefix },
  { header: 'STATUS', value: (token) => token.status },
  { header: 'SCOPES', value: (token) => token.scopes.join(',') },
  { header: 'EXPIRES', value: (token) => shortTime(token.expiresAt) },
];

function renderToken(token: ApiOperatorToken): string {
  return renderKeyValue([
    ['id', token.id],
    ['name', token.name],
    ['prefix', token.displayPrefix],
    ['status', token.status],
    ['scopes', token.scopes.join(', ')],
    ['created', token.createdAt],
    ['expires', token.expiresAt],
    ['revoked', token.revokedAt ?? undefined],
  ]);
}

function scopesOption(value: string): string[] {
  const scopes = value
    .split(',')
    .map((scope) => scope.trim())
    .filter(Boolean);
  const unknown = scopes.filter((scope) => !isOperatorPermission(scope));
  if (scopes.length === 0 || unknown.length > 0) {
    throw new InvalidArgumentError(`must be a comma-separated list of: ${OPERATOR_PERMISSIONS.join(', ')}`);
  }
  return scopes;
}

function daysOption(value: string): number {
  const days = Number(value);
  if (!Number.isSafeInteger(days) || days < 1 || days > OPERATOR_TOKEN_MAX_DAYS) {
    throw new InvalidArgumentError(`must be a whole number of days from 1 to ${OPERATOR_TOKEN_MAX_DAYS}`);
  }
  return days;
}

/** Operator API tokens for automation: create (shown once), list, revoke. Needs the operators:admin permission. */
export function operatorTokensCommand(): Command {
  const tokens = new Command('operator-tokens').description(
    'manage operator API tokens (gko_…): scoped, expiring credentials for the admin API, for automation',
  );

  withJson(
    tokens
      .command('create')
      .description('create a token; it is printed once and cannot be shown again')
      .requiredOption('--name <name>', 'what the token is for (shown in listings and the audit trail)')
      .requiredOption('--scopes <list>', `comma-separated permissions: ${OPERATOR_PERMISSIONS.join(', ')}`, scopesOption)
      .option('--expires-in-days <days>', `days until it expires (1 to ${OPERATOR_TOKEN_MAX_DAYS}; default 90)`, daysOption),
  ).action(async (options: JsonFlag & { name: string; scopes: string[]; expiresInDays?: number }) => {
    const created = await callApi<ApiCreatedOperatorToken>('POST', '/admin/operator-tokens', {
      name: options.name,
      scopes: options.scopes,
      ...(options.expiresInDays !== undefined ? { expiresInDays: options.expiresInDays } : {}),
    });
    emit(
      options,
      created,
      (answer) =>
        `Created operator token ${cell(answer.id)}. Store it now; it is not shown again:\n\n${answer.token}\n\n${renderToken(answer)}`,
    );
  });

  withJson(tokens.command('list').description('list every operator token, revoked and expired ones too')).action(
    async (options: JsonFlag) => {
      const list = await callApi<ApiOperatorTokenList>('GET', '/admin/operator-tokens');
      emit(options, list, (answer) => (answer.tokens.length === 0 ? 'No operator tokens.\n' : renderTable(COLUMNS, answer.tokens)));
    },
  );

  withJson(
    tokens
      .command('revoke')
      .description('revoke a token: refused from its next request on, on every replica')
      .argument('<id>', 'token id (otk_…)'),
  ).action(async (id: string, options: JsonFlag) => {
    const revoked = await callApi<ApiOperatorToken>('POST', `/admin/operator-tokens/${encodeURIComponent(id)}/revoke`);
    emit(options, revoked, (answer) => `Revoked operator token ${cell(answer.id)}.\n\n${renderToken(answer)}`);
  });
  return tokens;
}
