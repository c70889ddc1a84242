import { randomUUID } from 'node:crypto';
import type { AuthRequest } from '../auth-request';
import { estimateHold, type CreditHold, type HoldInputs } from '../../accounts/credit-holds';
import type { PriceTable } from '../../metering/price-table';
import { modelInGenerativePath } from '../../metering/requested-model';
import type { ClassifiedRoute, RouteFamily } from '../routes/route';
import { isTokenCount } from '../../metering/usage';
import { JsonScanner, WatchTree } from '../../metering/json-scanner';
import { tokensForBytes } from '../../metering/usage-estimate';
import { isMeteredRequest } from '../../metering/usage-extractor';
import { routingPath } from '../routes/classify';

/** The header Envoy's size of the request comes in; the gRPC adapter keeps it (headers-read.ts). */
export const REQUEST_SIZE_HEADER = 'content-length';

/**
 * The body fields a hold reads: the model, then each API's output limit
 * (chat completions' old and new names, the Responses API's, Gemini's).
 */
const WATCHED = new WatchTree([
  { path: ['model'], kind: 'capture' },
  { path: ['max_tokens'], kind: 'capture' },
  { path: ['max_completion_tokens'], kind: 'capture' },
  { path: ['max_output_tokens'], kind: 'capture' },
  { path: ['generationConfig', 'maxOutputTokens'], kind: 'capture' },
]);

/**
 * The output limits each family's API reads, as positions in WATCHED. A body may name several (an OpenAI-compatible
 * server such as vLLM takes `max_completion_tokens` over `max_tokens`): the hold takes the largest, so no choice an
 * upstream makes between them can outrun it; a field the family's API never reads is no limit.
 */
const OUTPUT_LIMITS: Readonly<Partial<Record<RouteFamily, readonly number[]>>> = {
  'chat-completions': [1, 2, 3],
  messages: [1],
  'generative-content': [4],
};

/**
 * One scanner for every Check, reset before each body, as the model step's
 * (a new scanner costs more than scanning a small body). The values are read
 * after the bytes, whether or not the document completed: a body Envoy cut
 * short (allow_partial_message) still shows the fields before the cut.
 */
const SCANNER = new JsonScanner(WATCHED, { arrayOfDocuments: false, onDocument: () => undefined });

/** What a body shows: the model and the output limit, each undefined when absent. */
interface ScannedBody {
  model: string | undefined;
  maxOutputTokens: number | undefined;
}

const NOTHING_SCANNED: ScannedBody = Object.freeze({ model: undefined, maxOutputTokens: undefined });

/** One pass of the shared scanner over the body's bytes, nothing parsed but the watched values. */
function scanBody(body: Uint8Array, limits: readonly number[]): ScannedBody {
  SCANNER.reset();
  SCANNER.write(body);
  const model = SCANNER.value(0);
  let maxOutputTokens: number | undefined;
  for (const at of limits) {
    const limit = SCANNER.value(at);
    if (isTokenCount(limit) && (maxOutputTokens === undefined || limit > maxOutputTokens)) maxOutputTokens = limit;
  }
  SCANNER.reset();
  return { model: typeof model === 'string' ? model : undefined, maxOutputTokens };
}

function requestBytesOf(request: AuthRequest): number | undefined {
  const text = request.headers[REQUEST_SIZE_HEADER];
  if (text !== undefined && /^[0-9]{1,15}$/.test(text)) return Number(text);
  return request.body?.length;
}

/**
 * The hold a metered request asks the store for (src/accounts/credit-holds.ts),
 * or none for a route whose answers are never metered: nothing would release
 * it. A request without an x-request-id (Envoy always sets one) holds under
 * an id of its own, which no usage record names: it expires.
 */
export function holdFor(request: AuthRequest, route: ClassifiedRoute, pricing: PriceTable | undefined): CreditHold | undefined {
  const { family } = route;
  // Only what metering will charge: a hold no usage record releases (token counting, a retrieval) would stand until it lapses.
  if (!isMeteredRequest(family, request.method, route.pathWithoutQuery)) return undefined;
  const requestBytes = requestBytesOf(request);
  const limits = OUTPUT_LIMITS[family] ?? [];
  const scanned = request.body !== undefined && request.body.length > 0 ? scanBody(request.body, limits) : NOTHING_SCANNED;
  let model = scanned.model;
  if (family === 'generative-content') {
    const inPath = modelInGenerativePath(routingPath(route.pathWithoutQuery));
    if (inPath.kind === 'model') model = inPath.model;
  }
  const inputs: HoldInputs = {
    model,
    maxOutputTokens: scanned.maxOutputTokens,
    // As metering estimates an answer's input when the upstream reports none.
    inputTokens: requestBytes === undefined ? undefined : tokensForBytes(requestBytes),
  };
  return estimateHold(request.requestId === '' ? `unnamed-${randomUUID()}` : request.requestId, inputs, pricing);
}
