/**
 * A stub envoy.service.ext_proc.v3.ExternalProcessor (grpc-js server, Envoy's
 * official protos) that records every side stream it is sent, message by
 * message, and how the stream ended. It stands where gateway-authz's usage
 * processor will be, so tests can prove what the Envoy-faithful front sends.
 *
 * Behaviours (settable between tests):
 *  - 'end-at-final' (default): reads everything and ends the call with OK at
 *    the final message (a response body chunk or response headers with
 *    end_of_stream, or response trailers), or when Envoy half-closes: what the
 *    real processor does, so that Envoy need not hold the stream for its
 *    deferred close.
 *  - 'silent': reads everything, never answers and never ends the call (Envoy's
 *    deferred close ends it).
 *  - 'fail': ends the call with UNAVAILABLE at the first message.
 */
import * as grpc from '@grpc/grpc-js';

import { externalProcessorService, headerValue, type ReceivedProcessingRequest } from './ext-proc-protocol';

export type ProcessorBehaviour = 'end-at-final' | 'silent' | 'fail';

export class RecordedSideStream {
  readonly messages: ReceivedProcessingRequest[] = [];
  /** Date.now() at each message. */
  readonly receivedAt: number[] = [];
  readonly openedAt = Date.now();
  /** Envoy half-closed its side (no more messages). */
  halfClosedAt: number | undefined;
  /** Envoy reset the stream (its close() resets after the half-close; a client's HTTP/2 RST). */
  cancelledAt: number | undefined;
  /** The processor (this stub) ended the call. */
  endedByProcessorAt: number | undefined;
  private readonly waiters: (() => void)[] = [];

  /** x-request-id from the request headers message, if one came. */
  get requestId(): string | undefined {
    return headerValue(this.messages.find((m) => m.request === 'request_headers')?.request_headers?.headers, 'x-request-id');
  }

  /** A message that ends the answer arrived: response body or headers with end_of_stream, or response trailers. */
  get sawFinalMessage(): boolean {
    return this.messages.some(isFinalMessage);
  }

  /** The stream is over, whoever ended it. */
  get over(): boolean {
    return this.halfClosedAt !== undefined || this.cancelledAt !== undefined || this.endedByProcessorAt !== undefined;
  }

  /** The response body the processor was sent, chunk after chunk. */
  responseBody(): Buffer {
    return Buffer.concat(this.messages.filter((m) => m.request === 'response_body').map((m) => m.response_body!.body));
  }

  /** Resolves once `condition` holds (checked after every event), or rejects after `timeoutMs`. */
  async until(condition: (stream: RecordedSideStream) => boolean, timeoutMs = 5000, what = 'the condition'): Promise<this> {
    const deadline = Date.now() + timeoutMs;
    while (!condition(this)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`side stream ${this.requestId ?? '(no request id)'}: ${what} not met within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this;
  }

  /** @internal */
  notify(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}

export function isFinalMessage(message: ReceivedProcessingRequest): boolean {
  return (
    (message.request === 'response_body' && message.response_body!.end_of_stream) ||
    (message.request === 'response_headers' && message.response_headers!.end_of_stream) ||
    message.request === 'response_trailers'
  );
}

export interface ExtProcRecorder {
  /** host:port */
  address: string;
  behaviour: ProcessorBehaviour;
  /** Every side stream, in the order they opened. */
  readonly streams: RecordedSideStream[];
  /** The side stream whose request headers carry this x-request-id, once it has arrived. */
  streamFor(requestId: string, timeoutMs?: number): Promise<RecordedSideStream>;
  /** Resolves once at least `count` side streams have opened. */
  waitForStreams(count: number, timeoutMs?: number): Promise<RecordedSideStream[]>;
  close(): Promise<void>;
}

export async function startExtProcRecorder(behaviour: ProcessorBehaviour = 'end-at-final'): Promise<ExtProcRecorder> {
  const server = new grpc.Server();
  const streams: RecordedSideStream[] = [];
  const watchers: (() => void)[] = [];
  const notifyAll = () => {
    for (const watcher of watchers.splice(0)) watcher();
  };
  const recorder: ExtProcRecorder = {
    address: '',
    behaviour,
    streams,
    async streamFor(requestId, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = streams.find((s) => s.requestId === requestId);
        if (found) return found;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no ext_proc side stream for x-request-id ${requestId} within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          watchers.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    async waitForStreams(count, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (streams.length < count) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`${streams.length} ext_proc side streams, not ${count}, within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          watchers.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      return streams;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.forceShutdown();
        resolve();
      }),
  };

  server.addService(externalProcessorService().definition, {
    Process: (call: grpc.ServerDuplexStream<ReceivedProcessingRequest, object>) => {
      const stream = new RecordedSideStream();
      streams.push(stream);
      const behaviourNow = recorder.behaviour;
      const endCall = () => {
        if (stream.endedByProcessorAt !== undefined || stream.cancelledAt !== undefined) return;
        stream.endedByProcessorAt = Date.now();
        call.end();
      };
      call.on('data', (message: ReceivedProcessingRequest) => {
        stream.messages.push(message);
        stream.receivedAt.push(Date.now());
        if (behaviourNow === 'fail' && stream.endedByProcessorAt === undefined) {
          stream.endedByProcessorAt = Date.now();
          call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'stub processor: failing on purpose' });
        } else if (behaviourNow === 'end-at-final' && isFinalMessage(message)) {
          endCall();
        }
        stream.notify();
        notifyAll();
      });
      call.on('end', () => {
        stream.halfClosedAt = Date.now();
        if (behaviourNow === 'end-at-final') endCall();
        stream.notify();
      });
      call.on('cancelled', () => {
        stream.cancelledAt = Date.now();
        stream.notify();
      });
      call.on('error', () => undefined);
      notifyAll();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  recorder.address = `127.0.0.1:${port}`;
  return recorder;
}
