import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** How the receiver answers one request: a status, or never (the sender's timeout ends it). */
export type ReceiverAnswer = number | 'hang';

export interface ReceivedWebhook {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** What the receiver answered. */
  answer: ReceiverAnswer;
}

/**
 * A real HTTP receiver on a loopback port, as a customer would run one: it
 * records every request, answers from a script of answers (then 200), and
 * verifies signatures with the official `standardwebhooks` library.
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  private readonly answers: ReceiverAnswer[] = [];
  private readonly hanging = new Set<ServerResponse>();
  private constructor(private readonly server: Server) {}

  static async start(port = 0): Promise<WebhookReceiver> {
    const receiver: WebhookReceiver = new WebhookReceiver(
      createServer((request, response) => {
        let body = '';
        request.setEncoding('utf8');
        request.on('data', (chunk: string) => (body += chunk));
        request.on('end', () => {
          const answer = receiver.answers.shift() ?? 200;
          receiver.received.push({ path: request.url ?? '', headers: request.headers, body, answer });
          if (answer === 'hang') receiver.hanging.add(response);
          else response.writeHead(answer, { 'content-type': 'text/plain' }).end(answer < 300 ? 'ok' : 'failed');
        });
      }),
    );
    await new Promise<void>((resolve) => receiver.server.listen(port, '127.0.0.1', resolve));
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** The next requests are answered so, in order; after them, 200. */
  answerNext(...answers: ReceiverAnswer[]): void {
    this.answers.push(...answers);
  }

  on(path: string): ReceivedWebhook[] {
    return this.received.filter((request) => request.path === path);
  }

  /** The payload, once its signature verified with the endpoint's secret (throws otherwise, as a receiver refuses it). */
  static verified(request: ReceivedWebhook, secret: string): { type: string; timestamp: string; data: Record<string, unknown> } {
    const headers = {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    };
    return new Webhook(secret).verify(request.body, headers) as { type: string; timestamp: string; data: Record<string, unknown> };
  }

  async stop(): Promise<void> {
    for (const response of this.hanging) response.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
