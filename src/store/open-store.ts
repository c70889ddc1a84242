import type { Settings } from '../platform/settings';
import { MemoryStore } from './memory-store';
import { RedisStore } from './redis/redis-store';
import type { Store } from '../ports/store';

/** Redis (standalone, Sentinel or Cluster) when configured, otherwise the embedded in-memory store. */
export async function openStore(settings: Settings): Promise<Store> {
  if (!settings.redis) {
    return new MemoryStore(undefined, {
      defaultMaxActiveKeys: settings.defaultMaxActiveKeys,
      usageStreamMaxLength: settings.usage.streamMaxLength,
    });
  }
  return RedisStore.connect({
    topology: settings.redis,
    commandTimeoutMs: settings.redisTimeoutMs,
    adminCommandTimeoutMs: settings.redisAdminTimeoutMs,
    defaultMaxActiveKeys: settings.defaultMaxActiveKeys,
    usageStreamMaxLength: settings.usage.streamMaxLength,
    usageDurability: settings.usage.durability,
  });
}
