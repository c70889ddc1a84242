import { randomUUID } from 'node:crypto';
import { restrictCommand } from './keys';
import { Command, Option } from 'commander';
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER } from '../../accounts/credit';
import { AdminApiError, AdminUnreachableError, type AdminAnswer } from '../admin-client';
import type { ApiAccount, ApiAccountList, ApiCredit } from '../api-types';
import { accountPath, callApi, exchangeWithApi, withJson, type JsonFlag } from '../command-kit';
import {
  accountStatusOption,
  idempotencyKeyOption,
  integerOption,
  maxActiveKeysOption,
  nonZeroIntegerOption,
  parseLimitList,
  parseTokenBudgetList,
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
  type Column,
} from '../output';

const PLAN_DEFAULT = "not overridden (the plan's limits apply)";
const BUDGET_DEFAULT = "not overridden (the plan's token budgets apply)";

/** `active, prepaid` / `suspended, post-paid`. */
function billingText(account: ApiAccount): string {
  return `${account.billing.status}, ${account.billing.creditBalance === null ? 'post-paid' : 'prepaid'}`;
}

export const ACCOUNT_COLUMNS: readonly Column<ApiAccount>[] = [
  { header: 'ID', value: (account) => account.id },
  { header: 'NAME', value: (account) => account.name },
  { header: 'BILLING', value: billingText },
  {
    header: 'BALANCE',
    // A server older than issue 35 sends no money text: its bare integer keeps the column as narrow as it was.
    value: ({ billing }) => billing.creditBalanceFormatted ?? billing.creditBalance ?? '-',
    align: 'right',
  },
  { header: 'CREATED', value: (account) => shortTime(account.createdAt) },
];

export function renderAccountList(list: ApiAccountList): string {
  const table = list.accounts.length === 0 ? 'No accounts.\n' : renderTable(ACCOUNT_COLUMNS, list.accounts);
  // A record the server cannot read is named, never silently dropped from the count.
  const unreadable = (list.unreadable ?? []).map(({ id, problem }) => `unreadable account ${id}: ${problem}\n`);
  return table + unreadable.join('');
}

/** An account view as `label  value` lines. */
export function renderAccount(account: ApiAccount): string {
  const { status, creditBalance } = account.billing;
  const { monthlySpendCap, spentThisMonth, creditShortfall } = account.billing;
  return renderKeyValue([
    ['id', account.id],
    ['name', account.name],
    ['status', status],
    ['billing', creditBalance === null ? 'post-paid' : 'prepaid'],
    ['credit balance', creditBalance === null ? '- (post-paid)' : moneyText(creditBalance, account.billing.creditBalanceFormatted)],
    [
      'monthly spend cap',
      monthlySpendCap === undefined
        ? undefined
        : monthlySpendCap === null
          ? 'none'
          : moneyText(monthlySpendCap, account.billing.monthlySpendCapFormatted),
    ],
    [
      'spent this month',
      spentThisMonth === undefined ? undefined : `${moneyText(spentThisMonth, account.billing.spentThisMonthFormatted)} (UTC month)`,
    ],
    [
      'credit shortfall',
      creditShortfall
        ? `${moneyText(creditShortfall, account.billing.creditShortfallFormatted)} (usage the balance could not take at its lower bound)`
        : undefined,
    ],
    ['key limits', formatLimits(account.limits.key, PLAN_DEFAULT)],
    ['account limits', formatLimits(account.limits.account, PLAN_DEFAULT)],
    // Absent from servers older than issue 15: then the line is left out.
    [
      'max active keys',
      account.maxActiveKeys === undefined ? undefined : (account.maxActiveKeys ?? 'not set (the service default applies)'),
    ],
    ['key token budgets', account.tokenBudgets ? formatTokenBudgets(account.tokenBudgets.key, BUDGET_DEFAULT) : undefined],
    ['account token budgets', account.tokenBudgets ? formatTokenBudgets(account.tokenBudgets.account, BUDGET_DEFAULT) : undefined],
    [
      'key restrictions',
      account.keyRestrictions === undefined ? undefined : formatRestrictions(account.keyRestrictions, 'none (each key may do everything)'),
    ],
    // Absent from servers older than issue 39: then the line is left out.
    [
      'exposed keys',
      account.exposedKeyAction === undefined
        ? undefined
        : account.exposedKeyAction === 'rotate'
          ? "rotated, refused after an hour's grace"
          : 'revoked at once',
    ],
    ['created', account.createdAt],
  ]);
}

/**
 * When no answer says whether the adjustment was applied (the API was not
 * reached, or its store did not answer), the error names the key that makes
 * a retry safe.
 */
function withRetryHint(error: unknown, idempotencyKey: string): unknown {
  const hint = ` To retry without applying it twice, run the same command with --idempotency-key ${idempotencyKey}`;
  if (error instanceof AdminApiError) {
    return error.status >= 500 ? new AdminApiError(error.status, error.code, `${error.message}${hint}`, error.field) : error;
  }
  if (error instanceof AdminUnreachableError) {
    return new AdminUnreachableError(`${error.message}; the adjustment may or may not have been applied.${hint}`);
  }
  return error;
}

type Billing = { status?: string; creditBalance?: number | null; monthlySpendCap?: number | null };
type BillingOptions = { status?: string; creditBalance?: number; postpaid?: true; monthlySpendCap?: number | false };

/** The `billing` part of a PATCH from the billing options; undefined when none is given. */
function billingFrom(options: BillingOptions): Billing | undefined {
  const billing: Billing = {};
  if (options.status !== undefined) billing.status = options.status;
  if (options.creditBalance !== undefined) billing.creditBalance = options.creditBalance;
  if (options.postpaid) billing.creditBalance = null;
  if (options.monthlySpendCap !== undefined) billing.monthlySpendCap = options.monthlySpendCap === false ? null : options.monthlySpendCap;
  return Object.keys(billing).length === 0 ? undefined : billing;
}

/** --status, --credit-balance and --postpaid, shared by `billing` and `set`. */
function withBillingOptions(command: Command): Command {
  return command
    .option('--status <status>', 'active or suspended (a suspended account is refused with 402)', accountStatusOption)
    .addOption(
      new Option(
        '--credit-balance <units>',
        'make the account prepaid with this balance, in whole units of the currency setting (micro-dollars by default)',
      )
        .argParser(integerOption)
        .conflicts('postpaid'),
    )
    .option('--postpaid', 'make the account post-paid (no credit balance, never refused for credit)')
    .option('--monthly-spend-cap <units>', 'what all its keys together may spend per calendar month (UTC)', spendCapOption)
    .option('--no-monthly-spend-cap', 'remove the monthly spend cap');
}

export function accountsCommand(): Command {
  const accounts = new Command('accounts').description('manage accounts through the admin API (ADMIN_URL, ADMIN_TOKEN)');

  withJson(
    accounts
      .command('create')
      .description('create an account (active and post-paid until changed)')
      .requiredOption('--id <id>', 'account id: 1-64 letters, digits, _ or -')
      .requiredOption('--name <name>', 'display name'),
  ).action(async (options: JsonFlag & { id: string; name: string }) => {
    const account = await callApi<ApiAccount>('POST', '/admin/accounts', { id: options.id, name: options.name });
    emit(options, account, (answer) => `Created account ${cell(answer.id)}.\n\n${renderAccount(answer)}`);
  });

  withJson(accounts.command('list').description('list all accounts')).action(async (options: JsonFlag) => {
    emit(options, await callApi<ApiAccountList>('GET', '/admin/accounts'), renderAccountList);
  });

  withJson(
    accounts
      .command('get')
      .description('show an account: billing status, credit balance, limit overrides')
      .requiredOption('--id <id>', 'account id'),
  ).action(async (options: JsonFlag & { id: string }) => {
    emit(options, await callApi<ApiAccount>('GET', accountPath(options.id)), renderAccount);
  });

  withJson(
    withBillingOptions(
      accounts
        .command('set')
        .description("change an account's name and billing in one call")
        .requiredOption('--id <id>', 'account id')
        .option('--name <name>', 'new display name'),
    ),
  ).action(async (options: JsonFlag & BillingOptions & { id: string; name?: string }, command: Command) => {
    const body: { name?: string; billing?: Billing } = {};
    if (options.name !== undefined) body.name = options.name;
    const billing = billingFrom(options);
    if (billing) body.billing = billing;
    if (Object.keys(body).length === 0) {
      command.error('error: give --name, --status, --credit-balance, --postpaid, --monthly-spend-cap or --no-monthly-spend-cap');
    }
    emit(options, await callApi<ApiAccount>('PATCH', accountPath(options.id), body), renderAccount);
  });

  withJson(
    withBillingOptions(
      accounts
        .command('billing')
        .description("change an account's billing: suspend or reactivate it, make it prepaid (with a balance) or post-paid")
        .requiredOption('--id <id>', 'account id'),
    ),
  ).action(async (options: JsonFlag & BillingOptions & { id: string }, command: Command) => {
    const billing = billingFrom(options);
    if (!billing) command.error('error: give --status, --credit-balance, --postpaid, --monthly-spend-cap or --no-monthly-spend-cap');
    emit(options, await callApi<ApiAccount>('PATCH', accountPath(options.id), { billing }), renderAccount);
  });

  withJson(
    accounts
      .command('limits')
      .description("override the default plan's request limits for an account (key: each key alone; account: all its keys together)")
      .requiredOption('--id <id>', 'account id')
      .addOption(
        new Option('--key-limits <list>', 'limits for each of its keys, such as "100/1m,10000/1d"')
          .argParser(parseLimitList)
          .conflicts('clearKeyLimits'),
      )
      .option('--clear-key-limits', 'remove the per-key override (the default plan applies)')
      .addOption(
        new Option('--account-limits <list>', 'limits for all its keys together, such as "1000/1m"')
          .argParser(parseLimitList)
          .conflicts('clearAccountLimits'),
      )
      .option('--clear-account-limits', 'remove the account-wide override (the default plan applies)'),
  ).action(
    async (
      options: JsonFlag & {
        id: string;
        keyLimits?: LimitArgument[];
        clearKeyLimits?: true;
        accountLimits?: LimitArgument[];
        clearAccountLimits?: true;
      },
      command: Command,
    ) => {
      const limits: { key?: LimitArgument[] | null; account?: LimitArgument[] | null } = {};
      if (options.keyLimits) limits.key = options.keyLimits;
      if (options.clearKeyLimits) limits.key = null;
      if (options.accountLimits) limits.account = options.accountLimits;
      if (options.clearAccountLimits) limits.account = null;
      if (Object.keys(limits).length === 0) {
        command.error('error: give --key-limits, --clear-key-limits, --account-limits or --clear-account-limits');
      }
      emit(options, await callApi<ApiAccount>('PATCH', accountPath(options.id), { limits }), renderAccount);
    },
  );

  withJson(
    accounts
      .command('key-cap')
      .description('cap how many keys the account may hold that are not revoked (expired ones count until revoked)')
      .requiredOption('--id <id>', 'account id')
      .addOption(
        new Option('--max <keys>', 'the most keys it may hold (0 allows no new key)').argParser(maxActiveKeysOption).conflicts('default'),
      )
      .option('--default', "remove the account's own cap (the service default, DEFAULT_MAX_ACTIVE_KEYS, applies)"),
  ).action(async (options: JsonFlag & { id: string; max?: number; default?: true }, command: Command) => {
    if (options.max === undefined && !options.default) command.error('error: give --max or --default');
    emit(options, await callApi<ApiAccount>('PATCH', accountPath(options.id), { maxActiveKeys: options.max ?? null }), renderAccount);
  });

  withJson(
    accounts
      .command('exposed-keys')
      .description(
        "what is done with the account's keys GitHub finds published: revoked at once (the default) or rotated with an hour's grace",
      )
      .requiredOption('--id <id>', 'account id')
      .addOption(
        new Option('--action <action>', 'revoke, rotate, or default (revoke)')
          .choices(['revoke', 'rotate', 'default'])
          .makeOptionMandatory(),
      ),
  ).action(async (options: JsonFlag & { id: string; action: 'revoke' | 'rotate' | 'default' }) => {
    const exposedKeyAction = options.action === 'default' ? null : options.action;
    emit(options, await callApi<ApiAccount>('PATCH', accountPath(options.id), { exposedKeyAction }), renderAccount);
  });

  withJson(
    accounts
      .command('token-budgets')
      .description("override the default plan's token budgets for an account (key: each key alone; account: all its keys together)")
      .requiredOption('--id <id>', 'account id')
      .addOption(
        new Option('--key-budgets <list>', 'tokens per window for each of its keys, such as "100000/1m,5000000/1d"')
          .argParser(parseTokenBudgetList)
          .conflicts('clearKeyBudgets'),
      )
      .option('--clear-key-budgets', 'remove the per-key override (the default plan applies)')
      .addOption(
        new Option('--account-budgets <list>', 'tokens per window for all its keys together, such as "20000000/1d"')
          .argParser(parseTokenBudgetList)
          .conflicts('clearAccountBudgets'),
      )
      .option('--clear-account-budgets', 'remove the account-wide override (the default plan applies)'),
  ).action(
    async (
      options: JsonFlag & {
        id: string;
        keyBudgets?: TokenBudgetArgument[];
        clearKeyBudgets?: true;
        accountBudgets?: TokenBudgetArgument[];
        clearAccountBudgets?: true;
      },
      command: Command,
    ) => {
      const tokenBudgets: { key?: TokenBudgetArgument[] | null; account?: TokenBudgetArgument[] | null } = {};
      if (options.keyBudgets) tokenBudgets.key = options.keyBudgets;
      if (options.clearKeyBudgets) tokenBudgets.key = null;
      if (options.accountBudgets) tokenBudgets.account = options.accountBudgets;
      if (options.clearAccountBudgets) tokenBudgets.account = null;
      if (Object.keys(tokenBudgets).length === 0) {
        command.error('error: give --key-budgets, --clear-key-budgets, --account-budgets or --clear-account-budgets');
      }
      emit(options, await callApi<ApiAccount>('PATCH', accountPath(options.id), { tokenBudgets }), renderAccount);
    },
  );

  withJson(
    accounts
      .command('credit')
      .description("add to (or, with a negative amount, debit) a prepaid account's credit balance")
      .requiredOption('--id <id>', 'account id')
      .requiredOption(
        '--amount <units>',
        'whole units of the currency setting (micro-dollars by default); negative debits',
        nonZeroIntegerOption,
      )
      .option(
        '--idempotency-key <key>',
        'apply this adjustment at most once per key within 24 h: give the same key to every retry of one adjustment ' +
          '(default: a new key for each run)',
        idempotencyKeyOption,
      ),
  ).action(async (options: JsonFlag & { id: string; amount: number; idempotencyKey?: string }) => {
    // A key on every run: with one the service repeats a call whose reply it lost from Redis, and a run that ends
    // without an answer can name the key that retries it safely.
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    let answer: AdminAnswer<ApiCredit>;
    try {
      answer = await exchangeWithApi<ApiCredit>(
        'POST',
        `${accountPath(options.id)}/credit`,
        { amount: options.amount },
        { [IDEMPOTENCY_KEY_HEADER]: idempotencyKey },
      );
    } catch (error) {
      throw withRetryHint(error, idempotencyKey);
    }
    const replayed = answer.headers.get(IDEMPOTENT_REPLAYED_HEADER) === 'true';
    emit(options, answer.body, (credit) =>
      replayed
        ? `Not applied again: idempotency key ${cell(idempotencyKey)} was already used for this adjustment of ` +
          `${cell(credit.accountId)}, which left the balance at ${moneyText(credit.creditBalance, credit.creditBalanceFormatted)}.\n`
        : `Credit balance of ${cell(credit.accountId)} is now ${moneyText(credit.creditBalance, credit.creditBalanceFormatted)}.\n`,
    );
  });

  accounts.addCommand(
    restrictCommand(
      'restrict',
      "restrict what every key of the account may do (each key's own restrictions can only narrow these)",
      accountPath,
      'keyRestrictions',
      renderAccount,
    ),
  );
  return accounts;
}
