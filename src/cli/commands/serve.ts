import { Command } from 'commander';
import { startApp } from '../../app';
import { createLogger } from '../../logging/logger';
import { loadSettings } from '../../settings/settings';

/** Runs the gRPC Check server and the admin API until SIGTERM or SIGINT. */
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
  const { settings } = result;
  const stop = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    // A last resort if draining hangs: never outlive the orchestrator's grace period silently.
    const deadline = setTimeout(
      () => {
        logger.error({ signal }, 'shutdown took too long; exiting');
        process.exit(1);
      },
      settings.shutdown.drainDelayMs + settings.shutdown.timeoutMs + 5_000,
    );
    deadline.unref();
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

export function serveCommand(): Command {
  return new Command('serve')
    .description('run the gRPC Check server and the admin API (settings from the environment)')
    .action(serve);
}
