import { loadSettings, type Settings } from '../../src/platform/settings';

type SettingsResult = ReturnType<typeof loadSettings>;
type Env = Parameters<typeof loadSettings>[0];
type ReadFile = NonNullable<Parameters<typeof loadSettings>[1]>;

/** The settings a result holds; a test that expected them fails with the problems listed. */
export function settingsIn(result: SettingsResult): Settings {
  if (!result.ok) throw new Error(`expected valid settings, got: ${result.problems.join('; ')}`);
  return result.settings;
}

/** The problems a result lists; a test that expected some fails when the settings were valid. */
export function problemsIn(result: SettingsResult): string[] {
  if (result.ok) throw new Error('expected problems, got valid settings');
  return result.problems;
}

export const settingsOf = (env: Env, readFile?: ReadFile): Settings => settingsIn(loadSettings(env, readFile));
export const problemsOf = (env: Env, readFile?: ReadFile): string[] => problemsIn(loadSettings(env, readFile));

/** loadSettings with CONFIG_FILE naming `path`, which holds `config` as JSON; any other read is a test bug. */
export function withConfigFile(config: unknown, env: Env = {}, path = '/etc/gateway/config.json'): SettingsResult {
  return loadSettings({ ...env, CONFIG_FILE: path }, (read) => {
    if (read !== path) throw new Error(`unexpected read of ${read}`);
    return JSON.stringify(config);
  });
}
