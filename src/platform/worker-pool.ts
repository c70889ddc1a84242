/**
 * GRPC_WORKERS > 1: several gateway-authz processes behind the same ports
 * (node:cluster), so a pod uses more than one core. One event loop tops out
 * at one core; measured with test/bench on a 2-core machine, 2 workers
 * decided about a quarter more Checks per second than one process (the
 * load driver and Redis shared those cores), and answered far sooner at the
 * same offered load.
 *
 * The primary process only supervises: it forks the workers, restarts one
 * that dies (giving up, exit 1, when they keep dying), passes SIGTERM and
 * SIGINT on and exits when every worker has drained. Each worker is a full
 * gateway-authz (gRPC Check and admin API on the shared ports; node:cluster
 * hands each new connection to the next worker, and Envoy's connections are
 * recycled by GRPC_MAX_CONNECTION_AGE_MS, so they spread). /metrics, served
 * by whichever worker gets the scrape, reports the sum over all workers.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Logger } from './logger';

const METRICS_REQUEST = 'gateway-authz:metrics-request';
const METRICS_RESPONSE = 'gateway-authz:metrics-response';
const METRICS_TIMEOUT_MS = 5_000;

interface MetricsRequest {
  type: typeof METRICS_REQUEST;
  id: number;
}
interface MetricsResponse {
  type: typeof METRICS_RESPONSE;
  id: number;
  text?: string;
  error?: string;
}

export interface WorkerPoolOptions {
  workers: number;
  /** After SIGTERM: how long the workers may take to drain before they are killed. */
  shutdownDeadlineMs: number;
  /** Give up when more than this many workers died within a minute (default 5). */
  maxRestartsPerMinute?: number;
}

/** Runs in the primary process; never returns control to a server of its own. */
export function runWorkerPool(logger: Logger, options: WorkerPoolOptions): void {
  const aggregator = new AggregatorRegistry();
  const live = new Set<number>();
  const restarts: number[] = [];
  let stopping = false;
  let failed = false;

  const fork = (): Worker => {
    const worker = cluster.fork();
    live.add(worker.id);
    worker.once('online', () => logger.info({ worker: worker.id, pid: worker.process.pid }, 'worker started'));
    return worker;
  };

  const finishIfDone = () => {
    if (live.size > 0) return;
    logger.info({ event: 'shutdown' }, 'all workers stopped');
    logger.flush?.();
    process.exit(failed ? 1 : 0);
  };

  const stop = (reason: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ reason, workers: live.size }, 'stopping the workers');
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    const deadline = setTimeout(() => {
      logger.error({ workers: live.size }, 'workers did not stop in time; killing them');
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
      failed = true;
      setTimeout(() => process.exit(1), 1_000).unref();
    }, options.shutdownDeadlineMs);
    deadline.unref();
    finishIfDone();
  };

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker.id);
    if (stopping) {
      if (code !== 0) failed = true;
      finishIfDone();
      return;
    }
    const now = Date.now();
    restarts.push(now);
    while (restarts.length > 0 && restarts[0]! < now - 60_000) restarts.shift();
    if (restarts.length > (options.maxRestartsPerMinute ?? 5)) {
      logger.fatal({ worker: worker.id, code, signal }, 'workers keep exiting; giving up');
      failed = true;
      stop('workers keep exiting');
      return;
    }
    logger.error({ worker: worker.id, code, signal }, 'worker exited unexpectedly; starting another');
    fork();
  });

  // A worker asks for the metrics of all workers when it is scraped.
  cluster.on('message', (worker, message: MetricsRequest) => {
    if (message?.type !== METRICS_REQUEST) return;
    const reply = (response: Omit<MetricsResponse, 'type' | 'id'>) => {
      if (worker.isConnected()) worker.send({ type: METRICS_RESPONSE, id: message.id, ...response });
    };
    aggregator.clusterMetrics().then(
      (text) => reply({ text }),
      (error: unknown) => reply({ error: error instanceof Error ? error.message : String(error) }),
    );
  });

  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  for (let i = 0; i < options.workers; i += 1) fork();
  logger.info({ workers: options.workers }, 'gateway-authz primary: workers starting');
}

/** What /metrics serves: a registry, or in a worker the sum over all workers. */
export interface MetricsSource {
  readonly contentType: string;
  metrics(): Promise<string>;
}

/**
 * In a worker: makes `registry` answer the primary's collection requests,
 * and returns a source for /metrics that asks the primary for the sum.
 */
export function clusterMetricsSource(registry: Registry): MetricsSource {
  AggregatorRegistry.setRegistries([registry]);
  // Constructing one installs prom-client's worker-side listener.
  new AggregatorRegistry();
  let nextId = 0;
  const pending = new Map<number, (response: MetricsResponse) => void>();
  process.on('message', (message: MetricsResponse) => {
    if (message?.type === METRICS_RESPONSE) pending.get(message.id)?.(message);
  });
  return {
    contentType: registry.contentType,
    metrics: () =>
      new Promise<string>((resolve, reject) => {
        const id = nextId++;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error('the primary did not answer with the metrics'));
        }, METRICS_TIMEOUT_MS);
        pending.set(id, (response) => {
          clearTimeout(timer);
          pending.delete(id);
          if (response.error !== undefined || response.text === undefined) reject(new Error(response.error ?? 'no metrics'));
          else resolve(response.text);
        });
        process.send?.({ type: METRICS_REQUEST, id } satisfies MetricsRequest);
      }),
  };
}
