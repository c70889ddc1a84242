import * as net from 'node:net';
import { EventLoopLag } from '../../../src/metrics/event-loop-lag';

function blockFor(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // Busy: what a GC pause or a long callback does to the loop.
  }
}

/**
 * "About 0": under 30 ms. The process shares two cores with the rest of the
 * suite, and the OS may deschedule it for several ms at any point; a blocked
 * loop reads 60 ms and more, so the two cannot be confused.
 */
const ABOUT_ZERO_MS = 30;

describe('EventLoopLag', () => {
  let lag: EventLoopLag;
  let server: net.Server;
  let client: net.Socket;
  let received: (lagMs: number) => void;

  beforeEach(async () => {
    lag = new EventLoopLag(5);
    server = net.createServer((socket) => socket.on('data', () => received(lag.currentMs(performance.now()))));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    client = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => client.once('connect', resolve));
  });

  afterEach(async () => {
    lag.stop();
    client.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it.each([
    ['in a timer callback (I/O of the same turn is read before the sampler runs)', (block: () => void) => setTimeout(block, 0)],
    ['in a setImmediate callback (I/O is read in the next turn, after the sampler ran late)', (block: () => void) => setImmediate(block)],
  ])('gives I/O read right after a block %s the time it waited, and about 0 once the loop is free', async (_where, schedule) => {
    lag.start();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const seen = new Promise<number>((resolve) => (received = resolve));
    schedule(() => {
      // The bytes reach the server socket during the block, as a Check arriving during a GC pause would.
      client.write('x');
      blockFor(80);
    });
    const lagAtRead = await seen;
    expect(lagAtRead).toBeGreaterThanOrEqual(60);
    expect(lagAtRead).toBeLessThan(200);
    await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setImmediate(resolve));
    expect(lag.currentMs(performance.now())).toBeLessThan(ABOUT_ZERO_MS);
  });

  it('reads 0 when the loop was not blocked', async () => {
    lag.start();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const seen = new Promise<number>((resolve) => (received = resolve));
    client.write('x');
    expect(await seen).toBeLessThan(ABOUT_ZERO_MS);
  });
});
