import type { Settings } from '../settings/settings';
import { MemoryStore } from './memory-store';
import { RedisStore } from './redis/redis-store';
import type { Store } from './store';

/** Redis when REDIS_URL is configured, otherwise the embedded in-memory store. */
export async function openStore(settings: Settings): Promise<Store> {
  if (!settings.redisUrl) return new MemoryStore();
  return RedisStore.connect({
    url: settings.redisUrl,
    commandTimeoutMs: settings.redisTimeoutMs,
    adminCommandTimeoutMs: settings.redisAdminTimeoutMs,
  });
}
