import { createHash } from 'node:crypto';
import Redis, { Cluster } from 'ioredis';
import type { CheckChannel, LuaSource } from '../../src/store/redis/check-connection';
import { openCheckChannel } from '../../src/store/redis/redis-client';
import { startTestRedisCluster, type TestRedisCluster } from '../support/redis-cluster';

/**
 * The Check path's channel on a Redis Cluster (ioredis) against a real
 * three-master cluster: what happens to a script whose reply is lost.
 */
jest.setTimeout(60_000);

let cluster: TestRedisCluster;
let direct: Cluster;

beforeAll(async () => {
  cluster = await startTestRedisCluster();
  direct = new Cluster(cluster.masters.map((master) => ({ host: '127.0.0.1', port: master.port })));
});
afterAll(async () => {
  direct.disconnect();
  await cluster.stop();
});

/** The Check channel as the service opens it for this cluster (the admin client is not used on a Cluster). */
const openChannel = (): Promise<CheckChannel> =>
  openCheckChannel(
    { mode: 'cluster', nodes: cluster.masters.map((master) => ({ host: '127.0.0.1', port: master.port })) },
    undefined as unknown as Redis,
    2000,
  );

const script = (lua: string): LuaSource => ({ lua, sha: createHash('sha1').update(lua).digest('hex') });

it('never runs a script again after its connection closed before the reply (it may have run: a rate limit would count twice)', async () => {
  const channel = await openChannel();
  try {
    // Counts its runs, then stays busy for 200 ms: the connection is cut while it runs.
    const counting = script(
      `redis.call('INCR', KEYS[1]) local s = redis.call('TIME') repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1000000 + n[2] - s[2] >= 200000 return redis.call('GET', KEYS[1]) -- ${Date.now()}`,
    );
    const key = '{cc-cluster}:runs';
    await direct.del(key);
    expect(await channel.script(counting, [key], [], (reply) => reply, 'authorize')).toBe('1');
    const outcome = channel
      .script(counting, [key], [], (reply) => reply, 'authorize')
      .then(
        (reply) => ({ reply }),
        (error: Error) => ({ error: error.message }),
      );
    await new Promise((resolve) => setTimeout(resolve, 60));
    const clusterClient = (channel as unknown as { cluster: Cluster }).cluster;
    for (const node of clusterClient.nodes('master')) (node as unknown as { stream?: { destroy(): void } }).stream?.destroy();
    expect(await outcome).toEqual({ error: expect.stringMatching(/Connection is closed/) });
    // Long enough for any retry to have reached Redis and run.
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(await direct.get(key)).toBe('2');
    // And the next Check goes through once the nodes are connected again.
    const back = performance.now();
    let reply: unknown = 'no answer';
    while (performance.now() - back < 3000 && reply === 'no answer') {
      reply = await channel.script(counting, [key], [], (value) => value, 'authorize').catch(() => 'no answer');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(reply).toBe('3');
  } finally {
    await channel.close();
  }
});

it('answers its first commands, on every master, as soon as it is open (the nodes are connected first)', async () => {
  const channel = await openChannel();
  try {
    // 48 hash tags: the slots of all three masters, each GET sent at once, as a replica's first Checks would be.
    const keys = Array.from({ length: 48 }, (_, i) => `{cc-first-${i}}:key`);
    const replies = await Promise.allSettled(keys.map((key) => channel.get(key, (reply) => reply, 'resolve_key')));
    expect(replies.filter((reply) => reply.status === 'rejected')).toEqual([]);
  } finally {
    await channel.close();
  }
});
