/**
 * The model a request names, as far as Check can know it: Gemini-style paths
 * name it (`…/models/{model}:generateContent`), chat-completions and messages
 * bodies name it in their top-level `model`. Metering reads the same path
 * rule, so Check and the usage record agree on a request's model.
 */

/** Longer names are no model anyone serves; the APIs' own names are under 100 characters. */
export const MAX_MODEL_NAME_LENGTH = 256;

/** A name that can be a model's: 1 to MAX_MODEL_NAME_LENGTH characters, no control characters. */
export function isPlausibleModelName(name: string): boolean {
  // eslint-disable-next-line no-control-regex
  return name.length > 0 && name.length <= MAX_MODEL_NAME_LENGTH && !/[\u0000-\u001f\u007f]/.test(name);
}

export type ModelInPath =
  | { readonly kind: 'none' }
  | { readonly kind: 'model'; readonly model: string }
  /** A model segment that does not decode, or decodes into no plausible name (a `/`, a control character, too long). */
  | { readonly kind: 'malformed' };

const MODEL_IN_PATH = /\/(?:models|tunedModels)\/([^/:]+):[A-Za-z]+$/;
const NO_MODEL: ModelInPath = Object.freeze({ kind: 'none' });
const MALFORMED: ModelInPath = Object.freeze({ kind: 'malformed' });

/**
 * `…/models/{model}:method` (also `tunedModels/{model}`, and Vertex's
 * `…/publishers/google/models/{model}`), the path without its query. The
 * segment is percent-decoded once, as the upstream decodes it: `%2D` is `-`,
 * `%252D` is the text `%2D` (which no pattern prices). A `%` that is no valid
 * escape, an escaped `/`, or a control character makes it malformed rather
 * than unknown: a request whose model cannot be read is never waved through
 * as if it named none.
 */
export function modelInGenerativePath(path: string): ModelInPath {
  const match = MODEL_IN_PATH.exec(path);
  if (!match) return NO_MODEL;
  const segment = match[1]!;
  let model = segment;
  if (segment.includes('%')) {
    try {
      model = decodeURIComponent(segment);
    } catch {
      return MALFORMED;
    }
  }
  return isPlausibleModelName(model) && !model.includes('/') ? { kind: 'model', model } : MALFORMED;
}

const SHOWN_MODEL_LENGTH = 80;

/**
 * A model name as an error message may quote it: at most SHOWN_MODEL_LENGTH
 * characters (then `…`), control characters and quotes replaced by `?`.
 * The name comes from the caller, so it is never echoed unbounded.
 */
export function shownModelName(model: string): string {
  const cut = model.length > SHOWN_MODEL_LENGTH ? `${model.slice(0, SHOWN_MODEL_LENGTH)}…` : model;
  // eslint-disable-next-line no-control-regex
  return cut.replace(/[\u0000-\u001f\u007f-\u009f'"\\\u2028\u2029]/g, '?');
}
