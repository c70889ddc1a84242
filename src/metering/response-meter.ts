import type { Clock } from '../platform/clock';
import type { PlacedHold } from '../accounts/credit-holds';
import type { MeteredResponse } from './metered-response';
import type { RouteFamily } from '../check/routes/route';
import { routingPath } from '../check/routes/classify';
import { modelInGenerativePath } from './requested-model';
import type { UsageOutcome, UsageReading } from './usage';
import { usageOutcome } from './usage-estimate';
import { answersWithoutUsage, createUsageExtractor, type UsageExtractor } from './usage-extractor';

/** An identified request, as the processor read it from its request headers. */
export interface MeteredRequest {
  readonly requestId: string;
  readonly accountId: string;
  readonly keyId: string;
  readonly keyPrefix: string;
  readonly family: RouteFamily;
  /** The hold ext_authz placed (its HOLD_HEADER); absent: none. */
  readonly hold?: PlacedHold;
  readonly method: string;
  /** Without the query. */
  readonly path: string;
}

export interface ObservedResponseHeaders {
  /** `:status`; 0 when Envoy sent none that parses. */
  readonly status: number;
  readonly contentType: string | undefined;
  readonly contentEncoding: string | undefined;
}

const NO_RESPONSE: UsageReading = Object.freeze({ kind: 'none', reason: 'no-response', streamComplete: false, deliveredTextBytes: 0 });

/**
 * The usage of one answer, from the parts of it Envoy hands the processor:
 * the request's identity, the response headers, the body chunks as they
 * pass, and how it ended. Memory is what the usage extractor keeps (bounded,
 * see json-scanner.ts) and a few numbers; nothing throws.
 */
export class ResponseMeter {
  private extractor: UsageExtractor | undefined;
  private status: number | undefined;
  private countedRequestBodyBytes = 0;
  private reportedRequestBytes: number | undefined;

  constructor(
    readonly request: MeteredRequest,
    private readonly clock: Clock,
  ) {}

  /** A chunk of the request body passed (sent only when Envoy's request body mode is STREAMED). */
  requestBody(bytes: number): void {
    this.countedRequestBodyBytes += bytes;
  }

  /** Envoy's `request.size` attribute: the request's content-length, or the body bytes it received without one. */
  requestSize(bytes: number): void {
    if (Number.isSafeInteger(bytes) && bytes >= 0) this.reportedRequestBytes = bytes;
  }

  /** True when the body must be read; false when the headers decided the outcome (no chunk need be passed). */
  responseHeaders(headers: ObservedResponseHeaders): boolean {
    if (this.extractor) return this.extractor.readsBody;
    this.status = headers.status;
    this.extractor = createUsageExtractor({
      family: this.request.family,
      method: this.request.method,
      path: this.request.path,
      status: headers.status,
      contentType: headers.contentType,
      contentEncoding: headers.contentEncoding,
    });
    return this.extractor.readsBody;
  }

  /** Ignored before the response headers: without a status nothing can be charged. */
  responseBody(chunk: Uint8Array): void {
    this.extractor?.write(chunk);
  }

  /** The answer's record. Call once, when the stream has ended. */
  finish(delivery: MeteredResponse['delivery']): MeteredResponse {
    const reading = this.extractor ? this.extractor.finish() : NO_RESPONSE;
    const request = this.request;
    const outcome = usageOutcome(reading, {
      family: request.family,
      requestBodyBytes: this.reportedRequestBytes ?? this.countedRequestBodyBytes,
      answersWithoutUsage: answersWithoutUsage(request.family, request.path),
    });
    const model = reading.model ?? modelInPath(request.family, request.path);
    return {
      requestId: request.requestId,
      accountId: request.accountId,
      keyId: request.keyId,
      keyPrefix: request.keyPrefix,
      family: request.family,
      ...(request.hold ? { hold: request.hold } : {}),
      ...(model !== undefined ? { model } : {}),
      outcome: withoutModel(outcome),
      delivery,
      ...(this.status !== undefined ? { httpStatus: this.status } : {}),
      observedAtMs: this.clock.now(),
    };
  }
}

function withoutModel(outcome: UsageOutcome): UsageOutcome {
  if (outcome.kind === 'free' || outcome.usage.model === undefined) return outcome;
  const { model: _model, ...usage } = outcome.usage;
  return { kind: 'metered', usage };
}

/** Gemini names the model in the path: the model of an answer that names none itself (see modelInGenerativePath). */
export function modelInPath(family: RouteFamily, path: string): string | undefined {
  if (family !== 'generative-content') return undefined;
  // As Check read it (src/check/pipeline/hold-step.ts): the routing form, so `…:generateContent/` names its model too.
  const found = modelInGenerativePath(routingPath(path));
  return found.kind === 'model' ? found.model : undefined;
}
