import type { FastifyBodyParser, FastifyInstance } from 'fastify';

/** fastify's default JSON parser is the callback form of FastifyBodyParser: it never returns a promise. */
type CallbackBodyParser = Exclude<FastifyBodyParser<string>, (...args: never[]) => Promise<unknown>>;

/**
 * JSON bodies as fastify parses them (refusing __proto__ and
 * constructor.prototype keys), except that an empty body reads as {}:
 * generic HTTP clients send `Content-Type: application/json` with no body
 * on actions such as revoke. Used by the admin API and the customer API.
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error') as CallbackBodyParser;
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body.length === 0) done(null, {});
    else parseJson(request, body.toString(), done);
  });
}
