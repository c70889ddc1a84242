import type { AuthRequest } from '../domain/auth-request';
import { denial } from '../domain/deny-reasons';
import { isModelRefused, type PriceTable } from '../domain/pricing';
import { modelInGenerativePath, shownModelName } from '../domain/requested-model';
import type { ClassifiedRoute } from '../domain/route';
import { JsonScanner, WatchTree } from '../metering/json-scanner';
import { routingPath } from '../routes/classify';

export type ModelRefusal = ReturnType<typeof denial<'model_not_priced'>> | ReturnType<typeof denial<'malformed_model_name'>>;

/**
 * Under `unpricedModels: refuse`, the refusal of a request for a model the
 * price table does not price, where Check knows the model: in the path of a
 * generative-content request, in the top-level `model` of a chat-completions
 * or messages body when Envoy sends the body. Otherwise (no price table,
 * `charge-default`, or a model Check cannot see) nothing is refused here, and
 * metering charges the default prices.
 */
export function refuseUnpricedModel(
  request: AuthRequest,
  route: ClassifiedRoute,
  pricing: PriceTable | undefined,
): ModelRefusal | undefined {
  if (pricing?.unpricedModels !== 'refuse') return undefined;
  let model: string | undefined;
  if (route.family === 'generative-content') {
    // The path as the upstream acts on it (dot segments resolved, unreserved escapes decoded): the model it will serve.
    const found = modelInGenerativePath(routingPath(route.pathWithoutQuery));
    if (found.kind === 'malformed') return denial('malformed_model_name');
    if (found.kind === 'model') model = found.model;
  } else if ((route.family === 'chat-completions' || route.family === 'messages') && request.body !== undefined) {
    model = topLevelModelOf(request.body);
  }
  if (model === undefined || !isModelRefused(pricing, model)) return undefined;
  return denial('model_not_priced', { model: shownModelName(model) });
}

const MODEL_TREE = new WatchTree([{ path: ['model'], kind: 'capture' }]);

/**
 * The top-level `"model"` string of a JSON body, or undefined when the body
 * is not one complete JSON document (cut short by `allow_partial_message`,
 * or no JSON at all) or has no such string: then the upstream answers the
 * request itself, and the gateway does not guess. One pass over the bytes,
 * nothing kept but the model (JsonScanner; the last `model` wins, as in
 * JSON.parse), so a large body is never parsed into objects.
 */
export function topLevelModelOf(body: Uint8Array): string | undefined {
  let model: string | undefined;
  const scanner = new JsonScanner(MODEL_TREE, {
    arrayOfDocuments: false,
    onDocument: (document) => {
      const value = document.value(0);
      if (typeof value === 'string') model = value;
    },
  });
  scanner.write(body);
  scanner.end();
  return model;
}
