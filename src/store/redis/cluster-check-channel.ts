import { performance } from 'node:perf_hooks';
import type { Cluster } from 'ioredis';
import type { CheckPathOperation, CheckPathTimer } from '../../check/ports';
import { StoreUnavailableError } from '../../ports/store';
import type { CheckChannel, LuaSource } from './check-connection';
import type { ScriptArgument } from './resp';
import { DeadlineSweeper, type Expiring } from '../../transport/deadline-sweeper';
import { DeadlineExceededError, withinDeadline } from './deadline';

interface Pending extends Expiring {
  readonly startedAt: number;
  readonly operation: CheckPathOperation;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
}

/**
 * The Check path on a Redis Cluster: ioredis routes each command to the node
 * that owns its slot (every key of one decision shares the account's hash
 * tag) and follows MOVED and ASK. The deadline and the timing are the same
 * as on the pipelined connection: one sweeper, no timer per command.
 */
export class ClusterCheckChannel implements CheckChannel {
  private timer: CheckPathTimer | undefined;
  private readonly sweeper = new DeadlineSweeper<Pending>((entry) =>
    this.settle(entry, undefined, new DeadlineExceededError(this.deadlineMs)),
  );

  constructor(
    private readonly cluster: Cluster,
    private readonly deadlineMs: number,
  ) {}

  timeWith(timer: CheckPathTimer): void {
    this.timer = timer;
  }

  script<T>(
    script: LuaSource,
    keys: readonly string[],
    args: readonly ScriptArgument[],
    parse: (reply: unknown) => T,
    operation: CheckPathOperation,
    late?: (value: T) => void,
  ): Promise<T> {
    const values = args.map((arg) => (typeof arg === 'string' ? arg : arg.buffer));
    return this.track(
      () =>
        this.cluster.evalsha(script.sha, keys.length, ...keys, ...values).catch((error: unknown) => {
          // A node without the script (restarted, or new to the slot) loads it with EVAL.
          if (error instanceof Error && error.message.startsWith('NOSCRIPT')) {
            return this.cluster.eval(script.lua, keys.length, ...keys, ...values);
          }
          throw error;
        }),
      parse,
      operation,
      late,
    );
  }

  get<T>(key: string, parse: (reply: unknown) => T, operation: CheckPathOperation): Promise<T> {
    return this.track(() => this.cluster.get(key), parse, operation);
  }

  async ping(deadlineMs: number): Promise<void> {
    await withinDeadline(this.cluster.ping(), deadlineMs);
  }

  async close(): Promise<void> {
    this.sweeper.stop();
    try {
      await this.cluster.quit();
    } catch {
      this.cluster.disconnect();
    }
  }

  private track<T>(
    work: () => Promise<unknown>,
    parse: (reply: unknown) => T,
    operation: CheckPathOperation,
    late?: (value: T) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const startedAt = performance.now();
      const entry: Pending = {
        deadline: startedAt + this.deadlineMs,
        settled: false,
        startedAt,
        operation,
        resolve: resolve as (value: unknown) => void,
        reject,
      };
      this.sweeper.add(entry);
      work().then(
        (reply) => {
          let value: unknown;
          try {
            value = parse(reply);
          } catch (error) {
            this.settle(entry, undefined, error as Error);
            return;
          }
          if (entry.settled) late?.(value as T);
          else this.settle(entry, value, undefined);
        },
        (error: unknown) => this.settle(entry, undefined, error instanceof Error ? error : new Error(String(error))),
      );
    });
  }

  private settle(entry: Pending, value: unknown, error: Error | undefined): void {
    if (entry.settled) return;
    entry.settled = true;
    this.sweeper.settled();
    this.timer?.(entry.operation, (performance.now() - entry.startedAt) / 1000, error !== undefined);
    if (error === undefined) entry.resolve(value);
    else
      entry.reject(
        error instanceof StoreUnavailableError
          ? error
          : new StoreUnavailableError(`Redis command failed: ${error.message}`, { cause: error }),
      );
  }
}
