import * as net from 'node:net';
import { IDENTITY_HEADERS } from '../../src/check/responses/identity-headers';
import {
  createOfficialCheckClient,
  envoyCheckRequest,
  type OfficialCheckClient,
  type OfficialCheckResponse,
} from '../support/envoy-official-client';
import { parseDenyBody } from '../support/deny-body';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';

/**
 * A reply matched to the wrong request, made on purpose: a TCP proxy between
 * the service and a real redis-server forwards every byte, and when armed
 * swaps the next two replies of a kind (the authorize script's, or the key
 * index's GET), so each of two Checks in flight reads the other's. The Check
 * compares the display prefix of the record the store decided on with the
 * presented key's: a crossed reply is answered store_unavailable, never an
 * allow or a denial under the other key's identity.
 */

/** Bytes of the complete RESP reply at `at`, or 0 while it is incomplete. */
function replyLength(buffer: Buffer, at: number): number {
  const lineEnd = buffer.indexOf('\r\n', at);
  if (lineEnd < 0) return 0;
  const type = String.fromCharCode(buffer[at]!);
  const head = lineEnd + 2 - at;
  if (type === '+' || type === '-' || type === ':') return head;
  const count = Number(buffer.toString('latin1', at + 1, lineEnd));
  if (type === '$') return count < 0 ? head : buffer.length >= lineEnd + 2 + count + 2 ? head + count + 2 : 0;
  if (type !== '*') throw new Error(`unexpected RESP type ${type}`);
  let length = head;
  for (let i = 0; i < Math.max(count, 0); i += 1) {
    const element = replyLength(buffer, at + length);
    if (element === 0) return 0;
    length += element;
  }
  return length;
}

class ReplySwappingProxy {
  private readonly server = net.createServer((client) => this.accept(client));
  private readonly open = new Set<net.Socket>();
  private armed: ((reply: string) => boolean) | undefined;
  swapped = 0;

  constructor(private readonly redisPort: number) {}

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `redis://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  /** Swaps the next two replies (on one connection) that `matches` picks, and what came between them keeps its place. */
  swapNext(matches: (reply: string) => boolean): void {
    this.armed = matches;
    this.swapped = 0;
  }

  async close(): Promise<void> {
    for (const socket of this.open) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect(this.redisPort, '127.0.0.1');
    this.open.add(client).add(upstream);
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', cut).on('close', cut);
    upstream.on('error', cut).on('close', cut);
    client.pipe(upstream);
    let pending = Buffer.alloc(0);
    // While armed and one matching reply was seen: it and every reply after it, held back.
    let held: Buffer[] = [];
    upstream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      let out: Buffer[] = [];
      for (let length = replyLength(pending, 0); length > 0; length = replyLength(pending, 0)) {
        const reply = pending.subarray(0, length);
        pending = pending.subarray(length);
        const matches = this.armed?.(reply.toString('latin1')) ?? false;
        if (held.length === 0) {
          if (matches) held = [reply];
          else out.push(reply);
        } else if (matches) {
          out = [...out, reply, ...held.slice(1), held[0]!];
          held = [];
          this.armed = undefined;
          this.swapped += 1;
        } else {
          held.push(reply);
        }
      }
      if (out.length > 0) client.write(Buffer.concat(out));
    });
  }
}

let redis: TestRedis;
let proxy: ReplySwappingProxy;
let server: AppUnderTest;
let client: OfficialCheckClient;

beforeAll(async () => {
  redis = await startTestRedis();
  proxy = new ReplySwappingProxy(redis.port);
  server = await startAppUnderTest({ redisUrl: await proxy.listen() });
  client = createOfficialCheckClient(server.grpcAddress);
});
afterAll(async () => {
  client?.close();
  await server?.close();
  await proxy?.close();
  await redis?.stop();
});

const chat = (key: string) => envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });

async function newKey(account: string): Promise<{ key: string; id: string }> {
  await server.admin('POST', '/admin/accounts', { id: account, name: account, billing: { creditBalance: 1_000_000 } });
  const { key, id } = (await server.admin('POST', `/admin/accounts/${account}/keys`, { name: 'k' })).body as { key: string; id: string };
  return { key, id };
}

/** 'allow as <key id>', or the deny code. */
function outcome(response: OfficialCheckResponse): string {
  if (response.status.code === 0) {
    const keyId = response.ok_response.headers.find((option) => option.header.key === IDENTITY_HEADERS.keyId)?.header.value;
    return `allow as ${String(keyId)}`;
  }
  return String(parseDenyBody(response.denied_response.body).error.code);
}

async function mismatches(): Promise<number> {
  const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
  return Number(/^gateway_authz_store_identity_mismatches_total (\d+)/m.exec(text)?.[1]);
}

it("answers store_unavailable, never an allow under the other key's identity, when two authorize replies are crossed", async () => {
  const first = await newKey('crossed-one');
  const second = await newKey('crossed-two');
  // Both key index entries cached: each Check below is one authorize script on the Check path's connection.
  expect(outcome(await client.check(chat(first.key)))).toBe(`allow as ${first.id}`);
  expect(outcome(await client.check(chat(second.key)))).toBe(`allow as ${second.id}`);
  const before = await mismatches();

  proxy.swapNext((reply) => reply.startsWith('*') && reply.includes('$5\r\nallow\r\n'));
  const crossed = await Promise.all([client.check(chat(first.key)), client.check(chat(second.key))]);
  expect(proxy.swapped).toBe(1);
  expect(crossed.map(outcome)).toEqual(['store_unavailable', 'store_unavailable']);
  expect(await mismatches()).toBe(before + 2);
  const logged = server.logs.lines.filter((line) => line.includes('display prefixes differ'));
  expect(logged).toHaveLength(2);
  expect(server.logs.leaksOf([first.key, second.key])).toEqual([]);

  expect(outcome(await client.check(chat(first.key)))).toBe(`allow as ${first.id}`);
  expect(outcome(await client.check(chat(second.key)))).toBe(`allow as ${second.id}`);
});

it('answers store_unavailable when two key index replies are crossed, and forgets the crossed cache entries, so the next Checks are right', async () => {
  const first = await newKey('indexed-one');
  const second = await newKey('indexed-two');
  const before = await mismatches();

  // Neither key looked up yet: each Check's GET of the key index is crossed with the other's, and cached.
  proxy.swapNext((reply) => reply.startsWith('$') && reply.includes(' indexed-'));
  const crossed = await Promise.all([client.check(chat(first.key)), client.check(chat(second.key))]);
  expect(proxy.swapped).toBe(1);
  expect(crossed.map(outcome)).toEqual(['store_unavailable', 'store_unavailable']);
  expect(await mismatches()).toBe(before + 2);

  expect(outcome(await client.check(chat(first.key)))).toBe(`allow as ${first.id}`);
  expect(outcome(await client.check(chat(second.key)))).toBe(`allow as ${second.id}`);
});
