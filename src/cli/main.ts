#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { startApp } from '../app';
import { createLogger } from '../logging/logger';
import { loadCliSettings, loadSettings } from '../settings/settings';
import { adminRequest } from './admin-client';

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
