import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';

const SRC = join(__dirname, '..', '..', '..', 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

/** The src/ folder (layer) of every relative import and export-from in a file. */
function layersImportedBy(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'(\.[^']*)'/gm)].map(
    (match) => relative(SRC, resolve(dirname(file), match[1]!)).split('/')[0]!,
  );
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
    expect(offendingImports('domain', ['limits', 'pipeline', 'store', 'grpc', 'admin', 'responses', 'settings'])).toEqual([]);
  });

  it('limits/ and pipeline/ import nothing from the store or other adapters', () => {
    expect(offendingImports('limits', ['store', 'pipeline', 'grpc', 'admin'])).toEqual([]);
    expect(offendingImports('pipeline', ['store', 'grpc', 'admin'])).toEqual([]);
  });
});
