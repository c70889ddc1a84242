import { createServer, connect, type AddressInfo } from 'node:net';
import { DeadlineExceededError, withinDeadline } from '../../../src/store/redis/deadline';

const blockEventLoop = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    /* busy, like a burst of Checks */
  }
};

describe('withinDeadline', () => {
  it('passes a result through', async () => {
    await expect(withinDeadline(Promise.resolve('ok'), 10)).resolves.toBe('ok');
  });

  it('passes a failure through', async () => {
    await expect(withinDeadline(Promise.reject(new Error('refused')), 10)).rejects.toThrow('refused');
  });

  it('fails at the deadline when no answer comes', async () => {
    await expect(withinDeadline(new Promise(() => undefined), 20)).rejects.toBeInstanceOf(DeadlineExceededError);
  });

  it('lets a reply that already arrived win over a deadline that expired while the loop was busy', async () => {
    const server = createServer((socket) => socket.on('data', (data) => socket.write(data)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    try {
      const reply = new Promise<string>((resolve) => socket.once('data', (data) => resolve(String(data))));
      const answer = withinDeadline(reply, 10);
      socket.write('pong');
      await new Promise((resolve) => setTimeout(resolve, 5)); // the echo is on its way
      blockEventLoop(50); // the deadline timer and the reply are now both ready
      await expect(answer).resolves.toBe('pong');
    } finally {
      socket.destroy();
      server.close();
    }
  });
});
