/**
 * deploy/envoy.yaml is generated from envoy.yaml by tools/derive-deploy-envoy.js (`npm run deploy:envoy`), so the
 * two cannot drift: the committed file must be exactly what the script makes of envoy.yaml today.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { readRepoFile, repoPath } from './support/repo-files';

const GENERATOR = repoPath('tools', 'derive-deploy-envoy.js');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'envoy-derived-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** The generator's output for `source` (envoy.yaml unless given), as `--stdout` prints it. */
function derive(source?: string) {
  const run = spawnSync(process.execPath, [GENERATOR, '--stdout', ...(source === undefined ? [] : [source])], { encoding: 'utf8' });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** envoy.yaml with one edit, in a file of its own. */
function editedEnvoy(from: string, to: string): string {
  const original = readRepoFile('envoy.yaml');
  expect(original).toContain(from);
  const file = path.join(fs.mkdtempSync(path.join(scratch, 'edit-')), 'envoy.yaml');
  fs.writeFileSync(file, original.replace(from, to));
  return file;
}

describe('deploy/envoy.yaml', () => {
  it('is exactly what `npm run deploy:envoy` makes of envoy.yaml (after editing envoy.yaml, run it)', () => {
    const derived = derive();
    expect(derived.code).toBe(0);
    expect(readRepoFile('deploy', 'envoy.yaml')).toBe(derived.stdout);
  });

  it('says it is generated, and from what', () => {
    expect(readRepoFile('deploy', 'envoy.yaml').split('\n')[0]).toBe(
      '# GENERATED from ../envoy.yaml by tools/derive-deploy-envoy.js (npm run deploy:envoy).',
    );
  });

  it('carries an edit of envoy.yaml outside the cluster addresses as it is', () => {
    const derived = derive(editedEnvoy('connect_timeout: 1s', 'connect_timeout: 2s'));
    expect(derived.code).toBe(0);
    expect(derived.stdout).toContain('connect_timeout: 2s');
    expect(derived.stdout).not.toContain('connect_timeout: 1s');
  });

  it('stops, naming the difference, when envoy.yaml no longer has a text the pod changes', () => {
    const derived = derive(editedEnvoy('address: upstream, port_value: 8081', 'address: llm-api, port_value: 8081'));
    expect(derived.code).toBe(1);
    expect(derived.stdout).toBe('');
    expect(derived.stderr).toContain('the text replaced for "upstream_api endpoint"');
  });
});
