import cluster from 'node:cluster';
import { Command } from 'commander';
import type { Logger } from '../../platform/logger';
import { endOfLifeMessage, nodeSupport, runtimeVerdict } from '../../platform/node-support';
import type { Settings } from '../../platform/settings';

/**
 * Runs the gRPC Check server and the admin API until SIGTERM or SIGINT.
 * The server's modules (fastify, grpc-js, ioredis, pino, prom-client, ...) are imported here, not at the top: every
 * other command, and `--help`, loads this file too, and would otherwise wait about a second for modules it never uses.
 * test/integration/cli.test.ts holds that `--help` loads none of them.
 */
async function serve(): Promise<void> {
  const [{ startApp }, { runWorkerPool }, { createLogger }, { loadSettings }] = await Promise.all([
    import('../../app'),
    import('../../platform/worker-pool'),
    import('../../platform/logger'),
    import('../../platform/settings'),
  ]);
  const result = loadSettings(process.env);
  if (!result.ok) {
    process.stderr.write(`gateway-authz: invalid configuration:\n${result.problems.map((p) => `  - ${p}`).join('\n')}\n`);
    process.exit(2);
  }
  const { settings } = result;
  const root = createLogger(settings.logLevel);
  // The primary judges the runtime once; its workers run the same binary.
  if (cluster.isPrimary) checkRuntime(settings, root);
  const shutdownDeadlineMs = settings.shutdown.drainDelayMs + settings.shutdown.timeoutMs + 5_000;
  if (settings.grpcWorkers > 1 && cluster.isPrimary) {
    // GRPC_WORKERS: this process supervises; the workers (this same command, forked) serve.
    runWorkerPool(root, { workers: settings.grpcWorkers, shutdownDeadlineMs: shutdownDeadlineMs + 2_000 });
    return;
  }
  const logger = cluster.isWorker ? root.child({ worker: cluster.worker?.id }) : root;
  let app;
  try {
    app = await startApp(settings, { logger, clusterWorker: cluster.isWorker });
  } catch (error) {
    logger.fatal({ err: error }, 'gateway-authz failed to start');
    process.exit(1);
  }
  let stopping = false;
  const stop = (signal: string) => {
    // A worker may get both the terminal's SIGINT and the primary's SIGTERM.
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // A last resort if draining hangs: never outlive the orchestrator's grace period silently.
    const deadline = setTimeout(() => {
      logger.error({ signal }, 'shutdown took too long; exiting');
      process.exit(1);
    }, shutdownDeadlineMs);
    deadline.unref();
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

/** Warns on an end-of-life Node.js major, and exits instead in production unless ALLOW_END_OF_LIFE_NODE=true. */
function checkRuntime(settings: Settings, logger: Logger): void {
  const version = process.versions.node;
  const support = nodeSupport(version, Date.now());
  const verdict = runtimeVerdict(support, settings.runtime);
  if (support.status !== 'end-of-life' || verdict === 'start') return;
  const message = endOfLifeMessage(support, version);
  if (verdict === 'refuse') {
    logger.fatal(
      { node: version, endOfLife: support.endOfLife },
      `${message} Refusing to start with NODE_ENV=production; ALLOW_END_OF_LIFE_NODE=true starts anyway.`,
    );
    process.exit(2);
  }
  logger.warn({ node: version, endOfLife: support.endOfLife }, message);
}

export function serveCommand(): Command {
  return new Command('serve').description('run the gRPC Check server and the admin API (settings from the environment)').action(serve);
}
