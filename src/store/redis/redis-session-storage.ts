import type { SessionStorage } from '../../http/sign-in/session-storage';
import type { RedisTopology } from '../../platform/settings';
import { StoreUnavailableError } from '../../ports/store';
import { closeClient, connectedClient, type ScriptedRedis } from './redis-client';
import { redisKeys } from './redis-keys';

/**
 * Customer dashboard sessions in Redis, one string key per session with a
 * time to live, so every replica serves every session. On a connection of its
 * own: a sign-in never waits behind Checks, and the Check path is untouched.
 */
export class RedisSessionStorage implements SessionStorage {
  private constructor(
    private readonly redis: ScriptedRedis,
    private readonly keyOf: (idHash: string) => string,
  ) {}

  /** `keyOf`: where a session lives; each dashboard has its own, so neither reads the other's sessions. */
  static async connect(
    topology: RedisTopology,
    commandTimeoutMs: number,
    keyOf: (idHash: string) => string = redisKeys.customerSession,
  ): Promise<RedisSessionStorage> {
    return new RedisSessionStorage(await connectedClient(topology, commandTimeoutMs, 'dashboard sessions'), keyOf);
  }

  async read(idHash: string): Promise<string | null> {
    return this.call(() => this.redis.get(this.keyOf(idHash)));
  }

  async write(idHash: string, data: string, ttlMs: number): Promise<void> {
    await this.call(() => this.redis.set(this.keyOf(idHash), data, 'PX', Math.max(1, Math.ceil(ttlMs))));
  }

  async remove(idHash: string): Promise<void> {
    await this.call(() => this.redis.del(this.keyOf(idHash)));
  }

  async close(): Promise<void> {
    await closeClient(this.redis);
  }

  private async call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      throw new StoreUnavailableError(`session storage: ${(error as Error).message}`, { cause: error });
    }
  }
}
