import { Argument, Command } from 'commander';
import { CHECK_DEADLINE_MS, DEFAULT_AUTHORITY, checkRequestFor, envoyViewOf, sendCheck } from '../check-client';
import { checkViewOf, renderCheckView } from '../check-view';
import { defaultCheckTarget } from '../command-kit';
import {
  deadlineSecondsOption,
  grpcTargetOption,
  headerLineOption,
  httpMethodOption,
  requestIdOption,
  requestPathOption,
  sourceAddressOption,
  type HeaderLine,
} from '../option-parsers';
import { emit } from '../output';

/**
 * Exit codes of `check`: a decision was printed (0 allow, 2 deny), or there
 * was none (1: a bad option, the service unreachable or answering a gRPC error).
 */
export const CHECK_EXIT_CODES = { allow: 0, deny: 2 } as const;

interface CheckOptions {
  grpcUrl?: string;
  method: string;
  header?: HeaderLine[];
  path?: string;
  requestId?: string;
  sourceAddress?: string;
  json?: true;
  deadline: number;
}

async function check(pathArgument: string | undefined, options: CheckOptions, command: Command): Promise<void> {
  if (pathArgument !== undefined && options.path !== undefined) command.error('error: give the path once: as PATH or with --path');
  const path = pathArgument ?? options.path;
  if (path === undefined) command.error('error: give the request path, such as /v1/models (as PATH or with --path)');
  const headers = options.header ?? [];
  if (options.requestId !== undefined && headers.some((header) => header.name === 'x-request-id')) {
    command.error("error: give the request id once: with --request-id or -H 'x-request-id: …'");
  }
  // Settings are read only now, after every option was accepted (as the admin commands read ADMIN_URL).
  const target = options.grpcUrl ?? (await defaultCheckTarget());
  const sent = envoyViewOf({
    method: options.method,
    path,
    headers,
    ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
    ...(options.sourceAddress !== undefined ? { sourceAddress: options.sourceAddress } : {}),
  });
  const response = await sendCheck(target, checkRequestFor(sent), options.deadline);
  const view = checkViewOf(target, sent, response);
  emit(options, view, renderCheckView);
  process.exitCode = CHECK_EXIT_CODES[view.decision];
}

export function checkCommand(): Command {
  return new Command('check')
    .description(
      'send one Check to a running gateway-authz, as Envoy would for an HTTP request, and print the decision\n' +
        `(exit code ${CHECK_EXIT_CODES.allow}: allow, ${CHECK_EXIT_CODES.deny}: deny, 1: no decision)`,
    )
    .addArgument(new Argument('[path]', 'request path with its query string, such as /v1/chat/completions').argParser(requestPathOption))
    .option('--path <path>', 'the request path, instead of the path argument', requestPathOption)
    .option('-X, --method <method>', 'HTTP method', httpMethodOption, 'GET')
    .option("-H, --header <'name: value'>", 'a request header, as curl takes it; repeat for more', headerLineOption)
    .option('--request-id <id>', 'x-request-id Envoy would send (default: a new UUID)', requestIdOption)
    .option('--source-address <ip>', "the client's address as Envoy reports it (default: 127.0.0.1)", sourceAddressOption)
    .option(
      '--grpc-url <host:port>',
      'gRPC address of gateway-authz (default: 127.0.0.1 and GRPC_PORT, else 9191); plaintext',
      grpcTargetOption,
    )
    .option('--deadline <seconds>', 'how long to wait for a connection and an answer together', deadlineSecondsOption, CHECK_DEADLINE_MS)
    .option('--json', 'print the request sent and the decision as one JSON document')
    .addHelpText(
      'after',
      `\nThe host is '${DEFAULT_AUTHORITY}' (Envoy's listener) unless a 'host' header is given. Credentials are printed masked.`,
    )
    .action(check);
}
