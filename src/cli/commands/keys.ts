import { Command, Option } from 'commander';
import { DISPLAY_PREFIX_LENGTH } from '../../keys/customer-key';
import type { ApiCreatedKey, ApiKey, ApiKeyList, ApiRotatedKey } from '../api-types';
import { accountPath, callApi, keyPath, withJson, type JsonFlag } from '../command-kit';
import {
  describeDuration,
  environmentOption,
  graceOption,
  isoTimeOption,
  parseLimitList,
  parseTokenBudgetList,
  commaListOption,
  spendCapOption,
  type LimitArgument,
  type TokenBudgetArgument,
} from '../option-parsers';
import {
  cell,
  emit,
  formatLimits,
  formatRestrictions,
  formatTokenBudgets,
  moneyText,
  renderKeyValue,
  renderTable,
  shortTime,
  type CellValue,
  type Column,
} from '../output';

const KEY_WARNING = 'Store this key now: it will not be shown again.';

/** `gk_live_AbC4` → `gk_live_AbC4…`. Cut to the display length whatever the API sends, so a key cannot be shown by accident. */
export function shownPrefix(prefix: string): string {
  return `${prefix.slice(0, DISPLAY_PREFIX_LENGTH)}…`;
}

/** `active`, `revoked`, `expired`; a rotated key still in its grace period says until when it works. */
function statusText(key: ApiKey): string {
  return key.status === 'active' && key.revokeAt ? `active until ${shortTime(key.revokeAt)}` : key.status;
}

export const KEY_COLUMNS: readonly Column<ApiKey>[] = [
  { header: 'PREFIX', value: (key) => shownPrefix(key.prefix) },
  { header: 'NAME', value: (key) => key.name },
  { header: 'ENV', value: (key) => key.environment },
  { header: 'STATUS', value: statusText },
  { header: 'CREATED', value: (key) => shortTime(key.createdAt) },
  { header: 'LAST USED', value: (key) => shortTime(key.lastUsedAt, 'never') },
  { header: 'EXPIRES', value: (key) => shortTime(key.expiresAt) },
  { header: 'ID', value: (key) => key.id },
];

export function renderKeyList(accountId: string, list: ApiKeyList): string {
  return list.keys.length === 0 ? `Account ${cell(accountId)} has no keys.\n` : renderTable(KEY_COLUMNS, list.keys);
}

/** A key view as `label  value` lines. Never the key: the view holds only its prefix. */
export function renderKey(key: ApiKey): string {
  return renderKeyValue([
    ['id', key.id],
    ['account', key.accountId],
    ['prefix', shownPrefix(key.prefix)],
    ['name', key.name],
    ['environment', key.environment],
    ['status', key.status],
    ['created', key.createdAt],
    ['last used', key.lastUsedAt ?? 'never'],
    ['expires', key.expiresAt ?? 'never'],
    ['revoked', key.revokedAt ?? undefined],
    ['stops working', key.status === 'active' ? (key.revokeAt ?? undefined) : undefined],
    ['replaces', key.replaces ?? undefined],
    ['replaced by', key.replacedBy ?? undefined],
    ['limits', formatLimits(key.limits, "not overridden (the account's key limits, else the plan's, apply)")],
    [
      'restrictions',
      key.restrictions === undefined ? undefined : formatRestrictions(key.restrictions, "none of its own (the account's apply)"),
    ],
    [
      'token budgets',
      key.tokenBudgets === undefined
        ? undefined
        : formatTokenBudgets(key.tokenBudgets, "not overridden (the account's key budgets, else the plan's, apply)"),
    ],
    [
      'monthly spend cap',
      key.monthlySpendCap === undefined
        ? undefined
        : key.monthlySpendCap === null
          ? 'none of its own'
          : moneyText(key.monthlySpendCap, key.monthlySpendCapFormatted),
    ],
  ]);
}

/** The one time a full key is printed: set apart on its own line, with the warning. */
function renderNewKey(heading: string, created: ApiCreatedKey, extra: readonly (readonly [string, CellValue])[] = []): string {
  return [
    `${heading}\n`,
    '\n',
    `    ${cell(created.key)}\n`,
    '\n',
    `${KEY_WARNING}\n`,
    '\n',
    renderKeyValue([
      ['id', created.id],
      ['account', created.accountId],
      ['prefix', shownPrefix(created.prefix)],
      ['name', created.name],
      ['environment', created.environment],
      ['created', created.createdAt],
      ...extra,
    ]),
  ].join('');
}

/** What happens to the old key after a rotation: refused now, or working until its revokeAt. */
export function oldKeyFate(rotated: ApiRotatedKey, graceSeconds: number): string {
  const old = rotated.oldKey;
  const name = `${shownPrefix(old.prefix)} (${cell(old.id)})`;
  if (old.status !== 'active') return `The old key ${name} is refused from now on.\n`;
  const until = old.revokeAt ? shortTime(old.revokeAt) : `${describeDuration(graceSeconds)} from now`;
  return `The old key ${name} keeps working until ${until} (grace ${describeDuration(graceSeconds)}), then is refused.\n`;
}

export function renderRotation(rotated: ApiRotatedKey, graceSeconds: number): string {
  return (
    renderNewKey(`Rotated key ${cell(rotated.replaces)}. The new key:`, rotated, [['replaces', rotated.replaces]]) +
    '\n' +
    oldKeyFate(rotated, graceSeconds)
  );
}

export function keysCommand(): Command {
  const keys = new Command('keys').description('manage customer API keys through the admin API (ADMIN_URL, ADMIN_TOKEN)');

  withJson(
    keys
      .command('create')
      .description('create a key for an account; the full key is printed this once')
      .requiredOption('--account <id>', 'account the key belongs to')
      .option('--name <name>', 'a name that says where the key is used')
      .option('--env <environment>', 'live or test', environmentOption, 'live')
      .option('--expires-at <iso>', 'when the key stops working, such as 2026-01-31 or 2026-01-31T18:00:00Z', isoTimeOption),
  ).action(async (options: JsonFlag & { account: string; name?: string; env: 'live' | 'test'; expiresAt?: string }) => {
    const body: Record<string, string> = { environment: options.env };
    if (options.name !== undefined) body.name = options.name;
    if (options.expiresAt !== undefined) body.expiresAt = options.expiresAt;
    const created = await callApi<ApiCreatedKey>('POST', `${accountPath(options.account)}/keys`, body);
    emit(options, created, (answer) => renderNewKey(`Created key ${cell(answer.id)} for account ${cell(answer.accountId)}:`, answer));
  });

  withJson(
    keys
      .command('list')
      .description("list an account's keys (prefixes only; a key is never shown again after creation)")
      .requiredOption('--account <id>', 'account id'),
  ).action(async (options: JsonFlag & { account: string }) => {
    const list = await callApi<ApiKeyList>('GET', `${accountPath(options.account)}/keys`);
    emit(options, list, (answer) => renderKeyList(options.account, answer));
  });

  withJson(
    keys.command('get').description('show a key by its id (never the key itself)').requiredOption('--id <key-id>', 'key id (key_…)'),
  ).action(async (options: JsonFlag & { id: string }) => {
    emit(options, await callApi<ApiKey>('GET', keyPath(options.id)), renderKey);
  });

  withJson(
    keys
      .command('rotate')
      .description('replace a key with a new one; the old key is refused now, or after a grace period')
      .requiredOption('--id <key-id>', 'key id (key_…) of the key to replace')
      .option(
        '--grace <duration>',
        'how long the old key keeps working: 0 (refused now), 30s, 1h, 24h, 7d or seconds; at most 7d',
        graceOption,
        0,
      ),
  ).action(async (options: JsonFlag & { id: string; grace: number }) => {
    const rotated = await callApi<ApiRotatedKey>('POST', `${keyPath(options.id)}/rotate`, { graceSeconds: options.grace });
    emit(options, rotated, (answer) => renderRotation(answer, options.grace));
  });

  withJson(
    keys.command('revoke').description('revoke a key: it is refused from now on').requiredOption('--id <key-id>', 'key id (key_…)'),
  ).action(async (options: JsonFlag & { id: string }) => {
    const key = await callApi<ApiKey>('POST', `${keyPath(options.id)}/revoke`, {});
    emit(
      options,
      key,
      (answer) => `Revoked key ${cell(answer.id)} (${shownPrefix(answer.prefix)}): it is refused from now on.\n\n${renderKey(answer)}`,
    );
  });

  withJson(
    keys
      .command('set')
      .description("change a key's name or expiry")
      .requiredOption('--id <key-id>', 'key id (key_…)')
      .option('--name <name>', 'new name')
      .addOption(
        new Option('--expires-at <iso>', 'when the key stops working, such as 2026-01-31 or 2026-01-31T18:00:00Z')
          .argParser(isoTimeOption)
          .conflicts('expiry'),
      )
      .option('--no-expiry', 'remove the expiry: the key works until it is revoked')
      .option('--monthly-spend-cap <units>', 'what this key may spend per calendar month (UTC)', spendCapOption)
      .option('--no-monthly-spend-cap', "remove the key's own spend cap"),
  ).action(
    async (
      options: JsonFlag & { id: string; name?: string; expiresAt?: string; expiry: boolean; monthlySpendCap?: number | false },
      command: Command,
    ) => {
      const body: { name?: string; expiresAt?: string | null; monthlySpendCap?: number | null } = {};
      if (options.name !== undefined) body.name = options.name;
      if (options.expiresAt !== undefined) body.expiresAt = options.expiresAt;
      if (options.expiry === false) body.expiresAt = null;
      if (options.monthlySpendCap !== undefined) body.monthlySpendCap = options.monthlySpendCap === false ? null : options.monthlySpendCap;
      if (Object.keys(body).length === 0) {
        command.error('error: give --name, --expires-at, --no-expiry, --monthly-spend-cap or --no-monthly-spend-cap');
      }
      emit(options, await callApi<ApiKey>('PATCH', keyPath(options.id), body), renderKey);
    },
  );

  withJson(
    keys
      .command('limits')
      .description("override a key's own request limits")
      .requiredOption('--id <key-id>', 'key id (key_…)')
      .addOption(
        new Option('--limits <list>', 'limits for this key, such as "100/1m,10000/1d"').argParser(parseLimitList).conflicts('clear'),
      )
      .option('--clear', "remove the key's override (the account's key limits, else the default plan, apply)"),
  ).action(async (options: JsonFlag & { id: string; limits?: LimitArgument[]; clear?: true }, command: Command) => {
    if (!options.limits && !options.clear) command.error('error: give --limits or --clear');
    emit(options, await callApi<ApiKey>('PATCH', keyPath(options.id), { limits: options.limits ?? null }), renderKey);
  });

  withJson(
    keys
      .command('token-budgets')
      .description("override a key's own token budgets")
      .requiredOption('--id <key-id>', 'key id (key_…)')
      .addOption(
        new Option('--budgets <list>', 'tokens per window for this key, such as "100000/1m,5000000/1d"')
          .argParser(parseTokenBudgetList)
          .conflicts('clear'),
      )
      .option('--clear', "remove the key's override (the account's key budgets, else the default plan, apply)"),
  ).action(async (options: JsonFlag & { id: string; budgets?: TokenBudgetArgument[]; clear?: true }, command: Command) => {
    if (!options.budgets && !options.clear) command.error('error: give --budgets or --clear');
    emit(options, await callApi<ApiKey>('PATCH', keyPath(options.id), { tokenBudgets: options.budgets ?? null }), renderKey);
  });

  keys.addCommand(restrictCommand('restrict', "restrict what a key may do (within its account's defaults)", keyPath, 'restrictions'));
  return keys;
}

interface RestrictOptions extends JsonFlag {
  id: string;
  endpoints?: string[];
  readOnly?: true;
  models?: string[];
  sourceAddresses?: string[];
  clear?: true;
}

/**
 * `keys restrict` and `accounts restrict`: the options build one restrictions object, which replaces the one stored
 * (docs/concepts/key-restrictions.md); the API checks every entry and answers with its own words.
 */
export function restrictCommand(
  name: string,
  description: string,
  pathOf: (id: string) => string,
  field: 'restrictions' | 'keyRestrictions',
  render: (answer: never) => string = renderKey,
): Command {
  const command = withJson(
    new Command(name)
      .description(description)
      .requiredOption('--id <id>', field === 'restrictions' ? 'key id (key_…)' : 'account id')
      .option(
        '--endpoints <list>',
        'route families or paths (exact, or a prefix ending in *), such as "/v1/embeddings,messages"',
        commaListOption,
      )
      .option('--read-only', 'only GET and HEAD requests, such as the model list')
      .option(
        '--models <list>',
        'model names, exact or a prefix ending in *, such as "gpt-4o-mini*,text-embedding-3-small"',
        commaListOption,
      )
      .option('--source-addresses <list>', 'CIDR ranges, IPv4 or IPv6, such as "10.0.0.0/8,2001:db8::/32"', commaListOption)
      .addOption(new Option('--clear', 'remove them all').conflicts(['endpoints', 'readOnly', 'models', 'sourceAddresses'])),
  );
  return command.action(async (options: RestrictOptions, self: Command) => {
    const restrictions = {
      ...(options.endpoints ? { endpoints: options.endpoints } : {}),
      ...(options.readOnly ? { readOnly: true } : {}),
      ...(options.models ? { models: options.models } : {}),
      ...(options.sourceAddresses ? { sourceAddresses: options.sourceAddresses } : {}),
    };
    if (!options.clear && Object.keys(restrictions).length === 0) {
      self.error('error: give --endpoints, --read-only, --models, --source-addresses or --clear');
    }
    const answer = await callApi<never>('PATCH', pathOf(options.id), { [field]: options.clear ? null : restrictions });
    emit(options, answer, render);
  });
}
