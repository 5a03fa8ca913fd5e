import type { AudioTarget } from '../audio/targets.js';
import { linkedin } from './linkedin/index.js';
import type { PlatformDefinition } from './platform.js';
import { telegram } from './telegram/index.js';
import { whatsapp } from './whatsapp/index.js';

/** The platforms this service delivers to: one line each. */
const PLATFORMS: readonly PlatformDefinition[] = [linkedin, telegram, whatsapp];

/** The names users see (send validation messages, usage by platform). */
export const PLATFORM_NAMES: readonly string[] = PLATFORMS.map((p) => p.name);

export interface PlatformRegistry {
  /** The platforms users can send to, in the order they are listed. */
  readonly names: readonly string[];
  get(name: string): PlatformDefinition | undefined;
  all(): readonly PlatformDefinition[];
}

/**
 * The registry of one app. `testOnly`: platforms a test suite registers for itself (through the app's
 * options, never from the environment), reachable by name but not listed to users.
 */
export function createPlatformRegistry(testOnly: readonly PlatformDefinition[] = []): PlatformRegistry {
  const byName = new Map<string, PlatformDefinition>();
  for (const platform of [...PLATFORMS, ...testOnly]) {
    if (byName.has(platform.name)) throw new Error(`platform ${platform.name} is registered twice`);
    byName.set(platform.name, platform);
  }
  const all = [...byName.values()];
  return { names: PLATFORM_NAMES, get: (name) => byName.get(name), all: () => all };
}

/** A built-in platform by name (tests, tools). */
export function builtInPlatform(name: string): PlatformDefinition {
  const found = PLATFORMS.find((p) => p.name === name);
  if (!found) throw new TypeError(`unknown platform: ${name}`);
  return found;
}

/** A copy of a built-in platform's voice format and limits. */
export function audioTargetFor(name: string): AudioTarget {
  return { ...builtInPlatform(name).audio };
}
