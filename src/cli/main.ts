#!/usr/bin/env node
import './compile-cache';
import { Command } from 'commander';
import { AdminApiError } from './admin-client';
import { accountsCommand } from './commands/accounts';
import { checkCommand } from './commands/check';
import { keysCommand } from './commands/keys';
import { membersCommand } from './commands/members';
import { operatorTokensCommand } from './commands/operator-tokens';
import { webhooksCommand } from './commands/webhooks';
import { cell } from './output';
import { packageVersion } from '../platform/package-version';
import { serveCommand } from './commands/serve';
import { usageCommand } from './commands/usage';

export function buildCli(): Command {
  const program = new Command('gateway-authz').description('Envoy ext_authz service for customer API keys').version(packageVersion());
  // No default command: a bare `gateway-authz` shows help (commander's answer for a command without an action: on
  // stderr, exit 1, as for `gateway-authz accounts` alone and as git does), rather than starting a server by surprise;
  // and a mistyped command gets commander's "did you mean", where a default command would take it as its argument.
  program.addCommand(serveCommand());
  program.addCommand(accountsCommand());
  program.addCommand(keysCommand());
  program.addCommand(membersCommand());
  program.addCommand(webhooksCommand());
  program.addCommand(usageCommand());
  program.addCommand(operatorTokensCommand());
  program.addCommand(checkCommand());
  // Usage errors show the command's help after commander's message, in every subcommand.
  const showHelpEverywhere = (command: Command) => {
    command.showHelpAfterError();
    command.commands.forEach(showHelpEverywhere);
  };
  showHelpEverywhere(program);
  return program;
}

/** One plain line on stderr: `error: account_not_found: No account 'x'.` */
export function describeFailure(error: unknown): string {
  const text = error instanceof AdminApiError ? error.describe() : error instanceof Error ? error.message : String(error);
  return `error: ${cell(text)}`;
}

if (require.main === module) {
  buildCli()
    .parseAsync(process.argv)
    .catch((error: unknown) => {
      process.stderr.write(`${describeFailure(error)}\n`);
      process.exitCode = 1;
    });
}
