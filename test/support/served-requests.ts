import * as diagnosticsChannel from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** One request as the in-process HTTP server itself saw it. */
export interface ServedRequest {
  path: string | undefined;
  authorization: string | undefined;
  status: number;
  /**
   * From the moment the server had read the request's head to the moment its answer was handed over: the server's own
   * time for it. Unlike a client's round trip, it leaves out the wait to be accepted and read, which on a loaded
   * machine can exceed any delay the server applies.
   */
  serverMs: number;
}

interface RequestStart {
  request: IncomingMessage;
  response: ServerResponse;
}

const REQUEST_START = 'http.server.request.start';

/**
 * Records every request that HTTP servers of this process answer until stop(), through node:http's diagnostics
 * channel (the servers need no hook of the test's). For servers started in the test's own process (running-app.ts).
 */
export function recordServedRequests(): { served: ServedRequest[]; stop(): void } {
  const served: ServedRequest[] = [];
  const onStart = (message: unknown) => {
    const { request, response } = message as RequestStart;
    const started = performance.now();
    // 'prefinish': end() was called and the whole answer is written out (a socket's 'finish' waits for other sockets too).
    response.once('prefinish', () => {
      served.push({
        path: request.url,
        authorization: request.headers.authorization,
        status: response.statusCode,
        serverMs: performance.now() - started,
      });
    });
  };
  diagnosticsChannel.subscribe(REQUEST_START, onStart);
  return { served, stop: () => diagnosticsChannel.unsubscribe(REQUEST_START, onStart) };
}
