import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium, which .ci/run installs; the tests never download a browser. */
const CHROMIUM = '/usr/bin/chromium';

/**
 * Headless and offline: without the background-networking flags Chromium's
 * own connections are refused by the machine's closed network at every start.
 */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Launches Chromium, or fails the suite loudly (`suite` names who needs it): browser tests never skip. */
export async function launchChromium(suite: string): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${suite} need Chromium at ${CHROMIUM} and never skip. ` +
        'Install the Debian package `chromium` (apt-get update && apt-get install -y chromium), as .ci/run does.',
    );
  }
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
