import { dirname, join, relative, resolve } from 'node:path';
import { importsOf, sourceFiles, SRC } from '../../support/source-imports';

/** The src/ folder (layer) of every relative import and export-from in a file. */
function layersImportedBy(file: string): string[] {
  return importsOf(file)
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => relative(SRC, resolve(dirname(file), specifier)).split('/')[0]!);
}

function offendingImports(layer: string, forbidden: readonly string[]): string[] {
  return sourceFiles(join(SRC, layer)).flatMap((file) =>
    layersImportedBy(file)
      .filter((imported) => forbidden.includes(imported))
      .map((imported) => `${relative(SRC, file)} imports ${imported}/`),
  );
}

describe('imports point one way: domain <- limits, pipeline <- adapters', () => {
  it('domain/ imports nothing from the layers built on it', () => {
    expect(
      offendingImports('domain', [
        'limits',
        'pipeline',
        'store',
        'grpc',
        'admin',
        'customer',
        'actions',
        'http',
        'responses',
        'settings',
        'metering',
      ]),
    ).toEqual([]);
  });

  it('actions/ (shared by the admin and customer APIs) import neither API nor any transport', () => {
    expect(offendingImports('actions', ['admin', 'customer', 'http', 'grpc', 'cli', 'settings'])).toEqual([]);
  });

  it('limits/ and pipeline/ import nothing from the store or other adapters', () => {
    expect(offendingImports('limits', ['store', 'pipeline', 'grpc', 'admin'])).toEqual([]);
    expect(offendingImports('pipeline', ['store', 'grpc', 'admin', 'customer'])).toEqual([]);
  });

  it('the customer dashboard and the admin API are separate adapters: neither imports the other', () => {
    expect(offendingImports('customer', ['admin', 'grpc', 'pipeline'])).toEqual([]);
    expect(offendingImports('admin', ['customer'])).toEqual([]);
    expect(offendingImports('store', ['customer'])).toEqual([]);
  });

  it('metering/ is pure: it imports only the domain, never transport, store, settings or other adapters', () => {
    expect(
      offendingImports('metering', ['store', 'grpc', 'admin', 'pipeline', 'settings', 'responses', 'limits', 'cluster', 'health']),
    ).toEqual([]);
  });
});
