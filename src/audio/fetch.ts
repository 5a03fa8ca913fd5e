import { createHash } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { createWriteStream } from 'node:fs';
import type { LookupFunction } from 'node:net';
import { pipeline } from 'node:stream/promises';
import type { Dispatcher } from 'undici';
import { Agent, buildConnector, request } from '../core/http-client.js';
import { AudioError } from './errors.js';
import { forbiddenAddressReason } from './ip-ranges.js';
import { vetAudioUrl, type AddressPolicy } from './url-check.js';

export const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const TRANSIENT_NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH',
  'EHOSTDOWN', 'ENETDOWN', 'EAI_AGAIN',
]);
// The name does not exist (NXDOMAIN) or has no address: waiting does not make a mistyped host appear.
const NO_SUCH_HOST_CODES = new Set(['ENOTFOUND', 'EAI_FAIL', 'ENODATA', 'EAI_NONAME']);

/**
 * What a refused host is told, whatever the reason: one sentence with no name and no address, the same
 * for a name that resolves to a private address and for one that does not resolve at all. Saying which
 * ("db-internal resolves to 10.1.2.3", "does not exist") would let a caller map internal names and
 * addresses through the status lookup. The operator gets the detail in a log line (`onRefused`).
 */
export const NOT_PUBLIC = 'the audio host is not a public address';

/** Thrown from inside the connector, so the check sits on the address the socket really uses. */
class BlockedAddressError extends Error {
  readonly code = 'AUDIO_FETCH_BLOCKED';
  constructor(readonly detail: string) {
    super(NOT_PUBLIC);
  }
}

/** The refusal's detail for the operator's log (never for the API): the host and why. */
export type RefusalLog = (detail: { host: string; reason: string }) => void;

export interface AudioAgentOptions {
  allowPrivate: boolean;
  /** Replaces DNS resolution (tests point made-up names at loopback servers). */
  lookup?: LookupFunction;
  addressPolicy?: AddressPolicy;
  /** Told the detail of every refused host (the host, what it resolved to or that it did not). */
  onRefused?: RefusalLog;
}

type ResolveAll = (hostname: string, family: number | undefined, cb: (err: Error | null, addrs: LookupAddress[]) => void) => void;

function resolverFrom(lookup: LookupFunction | undefined): ResolveAll {
  if (lookup) {
    return (hostname, family, cb) =>
      lookup(hostname, { all: true, family }, (err, address, fam) => {
        if (err) return cb(err, []);
        cb(null, typeof address === 'string' ? [{ address, family: fam ?? (address.includes(':') ? 6 : 4) }] : address);
      });
  }
  return (hostname, family, cb) => dnsLookup(hostname, { all: true, family }, (err, addrs) => cb(err, addrs ?? []));
}

function guardedLookup(resolveAll: ResolveAll, policy: AddressPolicy, onRefused: RefusalLog | undefined): LookupFunction {
  const refuse = (host: string, reason: string): BlockedAddressError => {
    onRefused?.({ host, reason });
    return new BlockedAddressError(`${host}: ${reason}`);
  };
  return (hostname, options, callback) => {
    const family = typeof options.family === 'number' ? options.family : undefined;
    resolveAll(hostname, family, (err, addrs) => {
      // A name that does not exist gets the same answer as one that resolves to a private address:
      // told apart, they map which names an internal resolver knows.
      const code = err ? errCode(err) : undefined;
      if (err && code !== undefined && NO_SUCH_HOST_CODES.has(code)) return callback(refuse(hostname, `does not resolve (${code})`), '', 0);
      if (err) return callback(err, '', 0);
      if (addrs.length === 0) return callback(refuse(hostname, 'has no address'), '', 0);
      // Refuse the name if any answer is forbidden: happy-eyeballs may pick any of them.
      for (const a of addrs) {
        const reason = policy(a.address);
        if (reason !== null) return callback(refuse(hostname, `resolves to ${reason}`), '', 0);
      }
      if (options.all) return callback(null, addrs);
      const first = addrs[0] as LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}

/**
 * An undici Agent whose connections are vetted twice: at DNS resolution (before any packet
 * leaves) and on the connected socket's peer address (catching literal IPs, which skip lookup).
 */
export function createAudioAgent(opts: AudioAgentOptions): Agent {
  const common = { headersTimeout: 0, bodyTimeout: 0 } as const; // the caller's total timeout governs
  if (opts.allowPrivate) {
    return new Agent({ ...common, connect: opts.lookup ? { lookup: opts.lookup } : {} });
  }
  const policy = opts.addressPolicy ?? forbiddenAddressReason;
  const connector = buildConnector({ lookup: guardedLookup(resolverFrom(opts.lookup), policy, opts.onRefused) });
  return new Agent({
    ...common,
    connect: (options, callback) => {
      connector(options, (err, socket) => {
        if (err !== null) return callback(err, null);
        const peer = socket.remoteAddress;
        const reason = peer === undefined ? 'an unknown peer address' : policy(peer);
        if (reason !== null) {
          socket.destroy();
          opts.onRefused?.({ host: options.hostname, reason: `connected to ${reason}` });
          return callback(new BlockedAddressError(`connected to ${reason}`), null);
        }
        callback(null, socket);
      });
    },
  });
}

export interface FetchAudioOptions {
  url: string;
  destPath: string;
  maxBytes: number;
  timeoutMs: number;
  allowPrivate: boolean;
  dispatcher: Dispatcher;
  addressPolicy?: AddressPolicy;
  signal?: AbortSignal;
  /** Told the detail of a URL or redirect refused for its address (the agent tells the DNS and socket ones). */
  onRefused?: RefusalLog;
}

export interface FetchedSource {
  path: string;
  sizeBytes: number;
  sha256: string;
  finalUrl: string;
}

function errorChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  let cur: unknown = err;
  while (cur !== undefined && cur !== null && chain.length < 8) {
    chain.push(cur);
    cur = cur instanceof Error ? cur.cause : undefined;
  }
  return chain;
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url.slice(0, 100);
  }
}

function errCode(e: unknown): string | undefined {
  if (typeof e === 'object' && e !== null && 'code' in e) {
    const code = (e as { code: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

function tooLarge(maxBytes: number): AudioError {
  return new AudioError('audio_too_large', `audio source is larger than ${maxBytes} bytes`);
}

class TimeoutReason extends Error {}

/** Drops a body we will not read; undici reports the early close as an error nobody needs to hear. */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

/**
 * Downloads the audio to destPath, following at most 5 redirects by hand so every hop is
 * vetted again, hashing on the way. Leaves a partial destPath behind on failure: the
 * caller owns the temp file and deletes it on every path.
 */
export async function fetchAudio(opts: FetchAudioOptions): Promise<FetchedSource> {
  const first = vetAudioUrl(opts.url, { allowPrivate: opts.allowPrivate, addressPolicy: opts.addressPolicy });
  if (!first.ok) {
    if (!first.blocked) throw new AudioError('audio_fetch_failed', first.message);
    opts.onRefused?.({ host: hostOf(opts.url), reason: first.message });
    throw new AudioError('audio_fetch_blocked', NOT_PUBLIC);
  }

  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new TimeoutReason('timeout')), opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([timeout.signal, opts.signal]) : timeout.signal;
  let current = first.url;
  try {
    for (let redirects = 0; ; redirects++) {
      const res = await request(current, {
        dispatcher: opts.dispatcher,
        method: 'GET',
        signal,
        headers: { accept: 'audio/*, video/*;q=0.8, */*;q=0.5', 'accept-encoding': 'identity', 'user-agent': 'voicenote-audio/1' },
      });
      const status = res.statusCode;
      if (REDIRECT_STATUSES.has(status)) {
        discard(res.body);
        if (redirects >= MAX_REDIRECTS) {
          throw new AudioError('audio_fetch_failed', `audio host redirected more than ${MAX_REDIRECTS} times (last HTTP ${status})`);
        }
        const location = res.headers.location;
        const loc = Array.isArray(location) ? location[0] : location;
        if (!loc) throw new AudioError('audio_fetch_failed', `audio host answered HTTP ${status} without a Location`);
        let next: URL;
        try {
          next = new URL(loc, current);
        } catch {
          throw new AudioError('audio_fetch_failed', `audio host answered HTTP ${status} with an invalid Location`);
        }
        const hop = vetAudioUrl(next, { allowPrivate: opts.allowPrivate, addressPolicy: opts.addressPolicy });
        if (!hop.ok) {
          if (!hop.blocked) throw new AudioError('audio_fetch_failed', `redirect refused: ${hop.message}`);
          opts.onRefused?.({ host: next.host, reason: `redirected to: ${hop.message}` });
          throw new AudioError('audio_fetch_blocked', `redirect refused: ${NOT_PUBLIC}`);
        }
        current = hop.url;
        continue;
      }
      if (status < 200 || status > 299) {
        discard(res.body);
        // A 4xx other than 408 (timeout) and 429 (slow down) will be the same answer next time.
        throw new AudioError('audio_fetch_failed', `audio host answered HTTP ${status}`, {
          transient: status >= 500 || status === 429 || status === 408,
        });
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > opts.maxBytes) {
        discard(res.body);
        throw tooLarge(opts.maxBytes);
      }
      const hash = createHash('sha256');
      let size = 0;
      await pipeline(
        res.body,
        async function* (source: AsyncIterable<Buffer>) {
          for await (const chunk of source) {
            size += chunk.length;
            if (size > opts.maxBytes) throw tooLarge(opts.maxBytes);
            hash.update(chunk);
            yield chunk;
          }
        },
        createWriteStream(opts.destPath),
        { signal },
      );
      return { path: opts.destPath, sizeBytes: size, sha256: hash.digest('hex'), finalUrl: current.href };
    }
  } catch (err) {
    throw classifyFetchError(err, current, opts, timeout.signal);
  } finally {
    clearTimeout(timer);
  }
}

function classifyFetchError(err: unknown, url: URL, opts: FetchAudioOptions, timeoutSignal: AbortSignal): unknown {
  if (err instanceof AudioError) return err;
  const chain = errorChain(err);
  const blocked = chain.find((e): e is BlockedAddressError => e instanceof BlockedAddressError);
  if (blocked) return new AudioError('audio_fetch_blocked', NOT_PUBLIC, { cause: err });
  const host = url.host;
  if (timeoutSignal.aborted) {
    return new AudioError('audio_fetch_failed', `audio fetch from ${host} timed out after ${opts.timeoutMs} ms`, { transient: true, cause: err });
  }
  if (opts.signal?.aborted) {
    return new AudioError('audio_fetch_failed', 'audio fetch aborted (pipeline closing)', { transient: true, cause: err });
  }
  for (const e of chain) {
    const code = errCode(e);
    if (code === undefined) continue;
    if (NO_SUCH_HOST_CODES.has(code)) {
      return new AudioError('audio_fetch_failed', `audio host ${url.hostname} does not exist (${code})`, { cause: err });
    }
    if (code.startsWith('UND_ERR') || TRANSIENT_NETWORK_CODES.has(code)) {
      return new AudioError('audio_fetch_failed', `audio host ${host} unreachable (${code})`, { transient: true, cause: err });
    }
    if (code.startsWith('ERR_TLS') || code.includes('CERT') || code.startsWith('ERR_SSL')) {
      return new AudioError('audio_fetch_failed', `TLS failure talking to ${host} (${code})`, { cause: err });
    }
  }
  // Local trouble (disk full, bugs) is not the audio's fault: let it surface as is.
  return err;
}
