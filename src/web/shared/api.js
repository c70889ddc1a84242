// @ts-check
/**
 * JSON calls from a dashboard page to the gateway's own API. Its errors are `{"error":{"code","message","field"?}}`;
 * every failure (no answer, an answer without that body, such as a proxy's HTML error page) becomes an ApiError with a
 * specific message, so the page always has something plain to show.
 */

export class ApiError extends Error {
  /**
   * @param {number} status  the HTTP status; 0 when there was no HTTP answer or the page refused before sending
   * @param {string} code  the API's error code; '' when there is none
   * @param {string} message  shown to the person as it is
   * @param {string} [field]  the request field the error is about
   */
  constructor(status, code, message, field) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/**
 * @typedef {object} JsonRequest
 * @property {unknown} [body]  sent as JSON
 * @property {Record<string, string>} [headers]
 * @property {RequestCredentials} [credentials]  'omit' (the default) unless the API relies on a session cookie
 * @property {string} [service]  how messages name the API, e.g. 'the admin API'
 */

/**
 * @param {string} method
 * @param {string} path  a same-origin path
 * @param {JsonRequest} [request]
 * @returns {Promise<unknown>}  the parsed body; null when the body is empty
 */
export async function fetchJson(method, path, request = {}) {
  const service = request.service ?? 'the server';
  /** @type {Record<string, string>} */
  const headers = { ...request.headers };
  /** @type {RequestInit} */
  const init = { method, headers, cache: 'no-store', credentials: request.credentials ?? 'omit', redirect: 'error' };
  if (request.body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(request.body);
  }
  let response;
  let text;
  try {
    response = await fetch(path, init);
    text = await response.text();
  } catch (error) {
    throw new ApiError(0, 'network_error', `Could not reach ${service} (${error instanceof Error ? error.message : String(error)}).`);
  }
  const data = parseJson(text);
  if (!response.ok) {
    const error = errorOf(data);
    if (error) throw new ApiError(response.status, error.code, error.message, error.field);
    throw new ApiError(response.status, '', `${sentenceCase(service)} answered HTTP ${response.status} without an error body.`);
  }
  return data;
}

/**
 * @param {string} text
 * @returns {unknown}
 */
function parseJson(text) {
  if (text === '') return null;
  try {
    return /** @type {unknown} */ (JSON.parse(text));
  } catch {
    return null;
  }
}

/**
 * The `error` object of an error body, when the answer has one.
 * @param {unknown} data
 * @returns {{ code: string, message: string, field?: string } | null}
 */
function errorOf(data) {
  if (!isObject(data) || !isObject(data.error)) return null;
  const { code, message, field } = data.error;
  if (typeof message !== 'string') return null;
  return { code: typeof code === 'string' ? code : '', message, ...(typeof field === 'string' ? { field } : {}) };
}

/**
 * @param {unknown} value
 * @returns {value is Record<string, unknown>}
 */
export function isObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** @param {string} text */
function sentenceCase(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
