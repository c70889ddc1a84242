import { Counter, Gauge, type Registry } from 'prom-client';
import { MALFORMED_USAGE_REASONS, type MalformedUsageReason } from './usage';

/** How an ext_proc stream's answer was counted (the `outcome` label). */
export type MeteringOutcome =
  /** The upstream reported usage; it is counted as reported. */
  | 'usage'
  /** A chat-completions answer without usable usage: an estimate is counted, marked estimated. */
  | 'estimated'
  /** Identified, but nothing to charge: an error answer, not a generation, no answer (see the reason). */
  | 'no_usage'
  /** Not metered against anyone: no identity, or the stream failed (see the reason); no record was made. */
  | 'not_metered';

/** Why a stream was not metered (not_metered), beside the no-usage reasons of src/metering/usage.ts. */
export type NotMeteredReason =
  /** No identity headers: ext_authz did not allow it (its local reply passes the filter too), or a route without ext_authz. */
  | 'no_identity'
  /** Some identity headers, repeated or malformed ones, or an unknown family: ext_authz sets all four once, so this is not its answer. */
  | 'invalid_identity'
  /** Identified, but no usable x-request-id: without it an answer cannot be counted exactly once. */
  | 'no_request_id'
  /** A ProcessingRequest that is not valid protobuf: answered INTERNAL. */
  | 'malformed_message'
  /** The transport ended the stream on its own error (a message above the size limit, a compressed one, a handler fault). */
  | 'stream_failed';

/**
 * The usage processor's metrics (ext_proc Process streams). Counted once per
 * stream, at its end, from sums kept on the stream: nothing is timed and no
 * metric is touched per body chunk. No account, key or model labels.
 */
export class ExtProcMetrics {
  private readonly responses: Counter<'family' | 'outcome' | 'delivery'>;
  private readonly unmetered: Counter<'reason'>;
  private readonly malformed: Counter<'family' | 'reason'>;
  private readonly refused: Counter;
  private readonly messages: Counter;
  private readonly bodyBytes: Counter;
  private readonly blockingMessages: Counter;
  private readonly responseCounters = new Map<string, Counter.Internal>();
  private readonly unmeteredCounters = new Map<string, Counter.Internal>();

  constructor(private readonly registry: Registry) {
    this.responses = new Counter({
      name: 'gateway_authz_ext_proc_responses_total',
      help:
        'Answers seen through ext_proc, once each when its stream ends, by route family, outcome (usage: counted as the upstream ' +
        'reported it; estimated; no_usage: nothing to charge; not_metered: counted against no one) and delivery (complete, or ' +
        'disconnected: the stream ended before the answer did).',
      labelNames: ['family', 'outcome', 'delivery'] as const,
      registers: [registry],
    });
    this.unmetered = new Counter({
      name: 'gateway_authz_ext_proc_unmetered_total',
      help:
        'Answers that cost nothing (no_usage) or were not metered (not_metered), by reason: error-status, not-metered-request, ' +
        'no-response, no-usage-reported… (see docs/concepts/metering.md); no_identity, invalid_identity, no_request_id, ' +
        'malformed_message, stream_failed.',
      labelNames: ['reason'] as const,
      registers: [registry],
    });
    this.malformed = new Counter({
      name: 'gateway_authz_ext_proc_malformed_usage_total',
      help:
        'Answers whose usage contradicted itself or was no count, charged the estimate instead (outcome estimated), by route ' +
        `family and reason: ${MALFORMED_USAGE_REASONS.join(', ')}.`,
      labelNames: ['family', 'reason'] as const,
      registers: [registry],
    });
    this.refused = new Counter({
      name: 'gateway_authz_ext_proc_streams_refused_total',
      help:
        'Process streams refused because EXT_PROC_MAX_STREAMS were open (RST_STREAM REFUSED_STREAM: Envoy may retry it on ' +
        'another replica; if none takes it, that answer passes unmetered).',
      registers: [registry],
    });
    this.messages = new Counter({
      name: 'gateway_authz_ext_proc_messages_total',
      help: 'ProcessingRequest messages received on ended Process streams.',
      registers: [registry],
    });
    this.bodyBytes = new Counter({
      name: 'gateway_authz_ext_proc_response_body_bytes_total',
      help: 'Response body bytes received on ended Process streams (read for usage, never kept).',
      registers: [registry],
    });
    this.blockingMessages = new Counter({
      name: 'gateway_authz_ext_proc_blocking_messages_total',
      help:
        'ProcessingRequests sent without observability_mode: Envoy waited for the (pass-through) reply, adding a round trip ' +
        'to the answer. envoy.yaml sets observability_mode: true; a non-zero count means a filter configured otherwise.',
      registers: [registry],
    });
  }

  /** Reports the open Process streams as a gauge, read at each scrape. */
  watchOpenStreams(openStreams: () => number): void {
    new Gauge({
      name: 'gateway_authz_ext_proc_streams_open',
      help: 'Process streams open now (one per answer being metered); at most EXT_PROC_MAX_STREAMS per process.',
      registers: [this.registry],
      collect() {
        this.set(openStreams());
      },
    });
  }

  /** Once per answer whose malformed usage was replaced by the estimate. */
  malformedUsage(family: string, reason: MalformedUsageReason): void {
    this.malformed.labels({ family, reason }).inc();
  }

  streamRefused(): void {
    this.refused.inc();
  }

  blockingMessage(): void {
    this.blockingMessages.inc();
  }

  /** Once per stream, when it ends. `reason` for no_usage and not_metered. */
  streamEnded(
    family: string,
    outcome: MeteringOutcome,
    delivery: 'complete' | 'disconnected',
    reason: string | undefined,
    messages: number,
    bodyBytes: number,
  ): void {
    const key = `${family} ${outcome} ${delivery}`;
    let counter = this.responseCounters.get(key);
    if (!counter) {
      counter = this.responses.labels({ family, outcome, delivery });
      this.responseCounters.set(key, counter);
    }
    counter.inc();
    if (reason !== undefined) {
      let reasonCounter = this.unmeteredCounters.get(reason);
      if (!reasonCounter) {
        reasonCounter = this.unmetered.labels({ reason });
        this.unmeteredCounters.set(reason, reasonCounter);
      }
      reasonCounter.inc();
    }
    if (messages > 0) this.messages.inc(messages);
    if (bodyBytes > 0) this.bodyBytes.inc(bodyBytes);
  }
}
