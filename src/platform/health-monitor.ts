import type { Logger } from './logger';

export type ServingStatus = 'SERVING' | 'NOT_SERVING';

/** Where the status goes: grpc.health.v1 (Envoy's health check, Kubernetes probes). */
export interface HealthSink {
  setStatus(service: string, status: ServingStatus): void;
}

export interface HealthMonitorOptions {
  /** How often the store is probed. */
  intervalMs: number;
  /** A probe slower than this counts as a failure: a slow Redis is a down Redis. */
  timeoutMs: number;
  /** The grpc.health.v1 service names to report under ('' = the whole server). */
  services: readonly string[];
}

/**
 * SERVING only while the store answers, NOT_SERVING as soon as it does not
 * and for good once shutdown has begun, so Envoy and Kubernetes stop sending
 * traffic to a replica that could only answer 503.
 */
export class HealthMonitor {
  private timer: NodeJS.Timeout | undefined;
  private status: ServingStatus = 'NOT_SERVING';
  private reason: 'starting' | 'store_unreachable' | 'shutting_down' | undefined = 'starting';
  private stopping = false;

  constructor(
    private readonly probe: () => Promise<void>,
    private readonly sink: HealthSink,
    private readonly logger: Logger,
    private readonly options: HealthMonitorOptions,
  ) {}

  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => void this.check(), this.options.intervalMs);
    this.timer.unref();
  }

  /** Probes once now; also what the timer runs. */
  async check(): Promise<ServingStatus> {
    if (this.stopping) return this.status;
    let timeout: NodeJS.Timeout | undefined;
    const ok = await Promise.race([
      this.probe().then(
        () => true,
        () => false,
      ),
      new Promise<boolean>((resolve) => {
        timeout = setTimeout(() => resolve(false), this.options.timeoutMs);
      }),
    ]);
    clearTimeout(timeout);
    // A probe that was in flight when shutdown began must not flip the status back.
    if (this.stopping) return this.status;
    this.set(ok ? 'SERVING' : 'NOT_SERVING', ok ? undefined : 'store_unreachable');
    return this.status;
  }

  shuttingDown(): void {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.set('NOT_SERVING', 'shutting_down');
  }

  current(): { status: ServingStatus; reason?: string } {
    return this.reason ? { status: this.status, reason: this.reason } : { status: this.status };
  }

  private set(status: ServingStatus, reason: HealthMonitor['reason']): void {
    const changed = status !== this.status || reason !== this.reason;
    this.status = status;
    this.reason = reason;
    if (!changed) return;
    for (const service of this.options.services) this.sink.setStatus(service, status);
    const log = { event: 'health', status, reason };
    if (status === 'SERVING') this.logger.info(log, 'serving');
    else this.logger.warn(log, 'not serving');
  }
}
