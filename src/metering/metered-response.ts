import type { RouteFamily } from '../check/routes/route';
import type { UsageOutcome } from './usage';
import type { PlacedHold } from '../accounts/credit-holds';

/**
 * One upstream answer as the usage processor saw it through Envoy's ext_proc
 * filter, once it ended: whose request it was (what ext_authz decided: the
 * identity headers it set on allow), what it cost in tokens, and how it
 * ended. Exactly one per ext_proc stream of an identified request; none for
 * a request without that identity (it is never metered against anyone).
 * Never a key, a header value other than the ids below, or any text of the
 * request or the answer.
 */
export interface MeteredResponse {
  /** Envoy's `x-request-id`: the key that counts each answer once, even if it is handed over twice. */
  readonly requestId: string;
  readonly accountId: string;
  readonly keyId: string;
  /** The key's display prefix, never the key. */
  readonly keyPrefix: string;
  /** The route family ext_authz classified the request into. */
  readonly family: RouteFamily;
  /** The credit hold ext_authz placed for the request (its HOLD_HEADER), to be released with the answer; absent: none. */
  readonly hold?: PlacedHold;
  /**
   * The model that served it: as the answer names it, else as the request's
   * path names it (Gemini's `models/{model}:generateContent`); absent when
   * neither does (chat-completions and messages name it only in the answer).
   */
  readonly model?: string;
  /**
   * What is counted: the usage the upstream reported, an estimate (marked
   * `estimated`), or nothing and why (an error answer, a request that is not
   * a generation, an answer that never came…). Its `usage` carries no model:
   * `model` above is the one place for it.
   */
  readonly outcome: UsageOutcome;
  /**
   * `complete`: Envoy delivered the answer to its end (the last body chunk,
   * or its trailers). `disconnected`: the stream ended before that (the
   * client or the upstream went away, or the processor shut down), and the
   * outcome counts what had passed by then.
   */
  readonly delivery: 'complete' | 'disconnected';
  /** The upstream's `:status`; absent when the stream ended before the response headers. */
  readonly httpStatus?: number;
  /** When the processor saw the answer end (epoch ms, on the injected clock): the period it is counted in. */
  readonly observedAtMs: number;
}

/**
 * Where the processor hands each metered answer. `record` is called on the
 * processor's stream handling, so it must be synchronous, must never throw
 * and must never wait (the usage ledger's recorder buffers and applies
 * later); the processor still catches and logs a throw.
 */
export interface MeteredResponseSink {
  record(response: MeteredResponse): void;
}
