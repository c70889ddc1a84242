import type { ClientStyle } from '../../routes/route';
import { chatErrorBody } from './chat-error-body';
import type { ErrorBodyInput } from './error-body-input';
import { genericErrorBody } from './generic-error-body';
import { generativeErrorBody } from './generative-error-body';
import { messagesErrorBody } from './messages-error-body';

export type { ErrorBodyInput } from './error-body-input';

const BODY_BUILDERS: Readonly<Record<ClientStyle, (input: ErrorBodyInput) => object>> = Object.freeze({
  chat: chatErrorBody,
  messages: messagesErrorBody,
  generative: generativeErrorBody,
  generic: genericErrorBody,
});

/** The JSON error body the caller's own SDK knows how to read. */
export function errorBodyFor(style: ClientStyle, input: ErrorBodyInput): string {
  return JSON.stringify(BODY_BUILDERS[style](input));
}
