#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from 'commander';
import { startApp } from '../app';
import { createLogger } from '../logging/logger';
import { loadCliSettings, loadSettings } from '../settings/settings';
import { adminRequest } from './admin-client';
import { accountStatusOption, integerOption, nonZeroIntegerOption, parseLimitList, type LimitArgument } from './option-parsers';

function environmentOption(value: string): 'live' | 'test' {
  if (value !== 'live' && value !== 'test') throw new InvalidArgumentError("must be 'live' or 'test'");
  return value;
}

async function serve(): Promise<void> {
  const result = loadSettings(process.env);
  if (!result.ok) {
    process.stderr.write(`gateway-authz: invalid configuration:\n${result.problems.map((p) => `  - ${p}`).join('\n')}\n`);
    process.exit(2);
  }
  const logger = createLogger(result.settings.logLevel);
  let app;
  try {
    app = await startApp(result.settings, { logger });
  } catch (error) {
    logger.fatal({ err: error }, 'gateway-authz failed to start');
    process.exit(1);
  }
  const stop = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

const accountPath = (id: string) => `/admin/accounts/${encodeURIComponent(id)}`;
const keyPath = (id: string) => `/admin/keys/${encodeURIComponent(id)}`;

export function buildCli(): Command {
  const program = new Command('gateway-authz')
    .description('Envoy ext_authz service for customer API keys')
    .showHelpAfterError();

  program
    .command('serve', { isDefault: true })
    .description('run the gRPC Check server and the admin API (settings from the environment)')
    .action(serve);

  const accounts = program.command('accounts').description('manage accounts through the admin API (ADMIN_URL, ADMIN_TOKEN)');
  accounts
    .command('create')
    .requiredOption('--id <id>', 'account id')
    .requiredOption('--name <name>', 'display name')
    .action(async (options: { id: string; name: string }) => {
      await adminRequest(loadCliSettings(process.env), 'POST', '/admin/accounts', { id: options.id, name: options.name });
    });

  accounts
    .command('get')
    .description('show an account: billing status, credit balance, limit overrides')
    .requiredOption('--id <id>', 'account id')
    .action(async (options: { id: string }) => {
      await adminRequest(loadCliSettings(process.env), 'GET', accountPath(options.id));
    });

  accounts
    .command('billing')
    .description("change an account's billing: suspend or reactivate it, make it prepaid (with a balance) or post-paid")
    .requiredOption('--id <id>', 'account id')
    .option('--status <status>', 'active or suspended (a suspended account is refused with 402)', accountStatusOption)
    .addOption(
      new Option('--credit-balance <minor-units>', 'make the account prepaid with this balance, in integer minor units')
        .argParser(integerOption)
        .conflicts('postpaid'),
    )
    .option('--postpaid', 'make the account post-paid (no credit balance, never refused for credit)')
    .action(async (options: { id: string; status?: string; creditBalance?: number; postpaid?: true }, command: Command) => {
      const billing: { status?: string; creditBalance?: number | null } = {};
      if (options.status !== undefined) billing.status = options.status;
      if (options.creditBalance !== undefined) billing.creditBalance = options.creditBalance;
      if (options.postpaid) billing.creditBalance = null;
      if (Object.keys(billing).length === 0) command.error('error: give --status, --credit-balance or --postpaid');
      await adminRequest(loadCliSettings(process.env), 'PATCH', accountPath(options.id), { billing });
    });

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
    .option('--clear-account-limits', 'remove the account-wide override (the default plan applies)')
    .action(
      async (
        options: {
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
        await adminRequest(loadCliSettings(process.env), 'PATCH', accountPath(options.id), { limits });
      },
    );

  accounts
    .command('credit')
    .description("add to (or, with a negative amount, debit) a prepaid account's credit balance")
    .requiredOption('--id <id>', 'account id')
    .requiredOption('--amount <minor-units>', 'integer minor units; negative debits', nonZeroIntegerOption)
    .action(async (options: { id: string; amount: number }) => {
      await adminRequest(loadCliSettings(process.env), 'POST', `${accountPath(options.id)}/credit`, { amount: options.amount });
    });

  const keys = program.command('keys').description('manage customer API keys through the admin API (ADMIN_URL, ADMIN_TOKEN)');
  keys
    .command('create')
    .requiredOption('--account <id>', 'account the key belongs to')
    .option('--name <name>', 'a name that says where the key is used')
    .option('--env <environment>', 'live or test', environmentOption, 'live')
    .action(async (options: { account: string; name?: string; env: 'live' | 'test' }) => {
      const body: Record<string, string> = { environment: options.env };
      if (options.name !== undefined) body.name = options.name;
      await adminRequest(loadCliSettings(process.env), 'POST', `/admin/accounts/${encodeURIComponent(options.account)}/keys`, body);
    });

  keys
    .command('get')
    .description('show a key by its id (never the key itself)')
    .requiredOption('--id <key-id>', 'key id (key_…)')
    .action(async (options: { id: string }) => {
      await adminRequest(loadCliSettings(process.env), 'GET', keyPath(options.id));
    });

  keys
    .command('limits')
    .description("override a key's own request limits")
    .requiredOption('--id <key-id>', 'key id (key_…)')
    .addOption(
      new Option('--limits <list>', 'limits for this key, such as "100/1m,10000/1d"').argParser(parseLimitList).conflicts('clear'),
    )
    .option('--clear', "remove the key's override (the account's key limits, else the default plan, apply)")
    .action(async (options: { id: string; limits?: LimitArgument[]; clear?: true }, command: Command) => {
      if (!options.limits && !options.clear) command.error('error: give --limits or --clear');
      await adminRequest(loadCliSettings(process.env), 'PATCH', keyPath(options.id), { limits: options.limits ?? null });
    });

  return program;
}

if (require.main === module) {
  buildCli()
    .parseAsync(process.argv)
    .catch((error: unknown) => {
      process.stderr.write(`gateway-authz: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    });
}
