import { createRequire } from 'node:module';
import type * as Undici from 'undici';

/**
 * The parts of undici this service uses (an Agent, a custom connector, `request`), loaded without
 * undici's index. `import 'undici'` loads all of it, fetch, WebSocket, EventSource, the mock and cache
 * layers included: 110 files, about 85 ms of the 390 ms a worker took to start on a 2-core machine,
 * against about 30 ms for these. The files are undici's own (the version the lockfile pins; there is
 * no `exports` map to forbid the paths): a release that moves them fails every delivery test.
 */
const require = createRequire(import.meta.url);

export const Agent = require('undici/lib/dispatcher/agent.js') as typeof Undici.Agent;
export type Agent = Undici.Agent;
export const buildConnector = require('undici/lib/core/connect.js') as typeof Undici.buildConnector;

/** undici's request API, called with the dispatcher as `this` (its index adds it to Dispatcher's prototype). */
const requestOn = require('undici/lib/api/api-request.js') as (this: Undici.Dispatcher, options: Undici.Dispatcher.RequestOptions) => Promise<Undici.Dispatcher.ResponseData>;
const { getGlobalDispatcher } = require('undici/lib/global.js') as { getGlobalDispatcher: typeof Undici.getGlobalDispatcher };
/** undici's URL check (http or https only, a valid port), as its own `request` runs it. */
const { parseURL } = require('undici/lib/core/util.js') as { parseURL: (url: string | URL) => URL };

type RequestOptions = Omit<Undici.Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & {
  method?: Undici.Dispatcher.HttpMethod;
  dispatcher?: Undici.Dispatcher;
};

/** As undici's `request(url, options)`: the URL checked and split into origin and path, the method GET unless a body says PUT. */
export function request(url: string | URL, options: RequestOptions = {}): Promise<Undici.Dispatcher.ResponseData> {
  const parsed = parseURL(url);
  const { dispatcher = getGlobalDispatcher(), ...rest } = options;
  return requestOn.call(dispatcher, {
    ...rest,
    origin: parsed.origin,
    path: parsed.search ? `${parsed.pathname}${parsed.search}` : parsed.pathname,
    method: options.method ?? (options.body ? 'PUT' : 'GET'),
  });
}
