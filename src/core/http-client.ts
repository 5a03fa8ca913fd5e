import { createRequire } from 'node:module';
import type * as Undici from 'undici';

/**
 * The parts of undici this service uses (an Agent, a custom connector, `request`), loaded without
 * undici's index. `import 'undici'` loads all of it, fetch, WebSocket, EventSource, the mock and cache
 * layers included: importing the built app took about 100 ms more CPU with it (482 ms against 378 ms,
 * medians of 8 runs each on a loaded 2-core machine; about 50 ms unloaded). The files are undici's own,
 * not its public API (it has no `exports` map to forbid the paths), so a release may move them:
 * `loadUndiciParts` checks each one when the service starts and stops it with a message that says what
 * to do, rather than with a bare "Cannot find module" or a wrong call later.
 */

type RequestOn = (this: Undici.Dispatcher, options: Undici.Dispatcher.RequestOptions) => Promise<Undici.Dispatcher.ResponseData>;

export interface UndiciParts {
  Agent: typeof Undici.Agent;
  buildConnector: typeof Undici.buildConnector;
  /** undici's request API, called with the dispatcher as `this` (its index adds it to Dispatcher's prototype). */
  requestOn: RequestOn;
  getGlobalDispatcher: typeof Undici.getGlobalDispatcher;
  /** undici's URL check (http or https only, a valid port), as its own `request` runs it. */
  parseURL: (url: string | URL) => URL;
}

/** Where each part lives in the undici the lockfile pins, and how it is taken from its module. */
const LAYOUT: { [K in keyof UndiciParts]: { file: string; pick: (module: unknown) => unknown } } = {
  Agent: { file: 'lib/dispatcher/agent.js', pick: (m) => m },
  buildConnector: { file: 'lib/core/connect.js', pick: (m) => m },
  requestOn: { file: 'lib/api/api-request.js', pick: (m) => m },
  getGlobalDispatcher: { file: 'lib/global.js', pick: (m) => (m as { getGlobalDispatcher?: unknown }).getGlobalDispatcher },
  parseURL: { file: 'lib/core/util.js', pick: (m) => (m as { parseURL?: unknown }).parseURL },
};

/** Loads every part through `load` (a `require`), or throws naming the first one this undici does not lay out as expected. */
export function loadUndiciParts(load: NodeJS.Require): UndiciParts {
  const parts: Partial<Record<keyof UndiciParts, unknown>> = {};
  for (const [name, { file, pick }] of Object.entries(LAYOUT) as Array<[keyof UndiciParts, (typeof LAYOUT)[keyof UndiciParts]]>) {
    let part: unknown;
    let why = 'it is not a function there';
    try {
      part = pick(load(`undici/${file}`));
    } catch (error) {
      why = (error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' ? 'the file is not there' : `it does not load: ${(error as Error).message}`;
    }
    if (typeof part !== 'function') {
      let version = 'of unknown version';
      try {
        version = (load('undici/package.json') as { version: string }).version;
      } catch {
        // the message goes without it
      }
      throw new Error(
        `undici ${version} does not have ${name} in undici/${file} (${why}). voicenote loads these files of undici by path to start ` +
          "faster (src/core/http-client.ts), and this undici lays them out differently: install the version package-lock.json pins " +
          "(npm ci), or change http-client.ts to import them from 'undici'.",
      );
    }
    parts[name] = part;
  }
  return parts as UndiciParts;
}

const parts = loadUndiciParts(createRequire(import.meta.url));

export const Agent = parts.Agent;
export type Agent = Undici.Agent;
export const buildConnector = parts.buildConnector;
/** The dispatcher `request` uses when given none: a direct connection. */
export const getGlobalDispatcher = parts.getGlobalDispatcher;

type RequestOptions = Omit<Undici.Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & {
  method?: Undici.Dispatcher.HttpMethod;
  dispatcher?: Undici.Dispatcher;
};

/** As undici's `request(url, options)`: the URL checked and split into origin and path, the method GET unless a body says PUT. */
export function request(url: string | URL, options: RequestOptions = {}): Promise<Undici.Dispatcher.ResponseData> {
  const parsed = parts.parseURL(url);
  const { dispatcher = parts.getGlobalDispatcher(), ...rest } = options;
  return parts.requestOn.call(dispatcher, {
    ...rest,
    origin: parsed.origin,
    path: parsed.search ? `${parsed.pathname}${parsed.search}` : parsed.pathname,
    method: options.method ?? (options.body ? 'PUT' : 'GET'),
  });
}
