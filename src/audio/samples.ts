import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import { vetAudioUrl } from './url-check.js';

/**
 * The sample voice notes the service ships (assets/samples/) and serves at /samples/NAME, so a first
 * sandbox send succeeds on a machine without internet. Only these names are served or recognised.
 */
export const SAMPLE_PATH_PREFIX = '/samples/';
export const SAMPLE_NAMES = ['hello.ogg'] as const;
export const SAMPLE_CONTENT_TYPE = 'audio/ogg';

/** assets/ sits two folders above this file both in src/audio/ and in dist/audio/. */
const SAMPLES_DIR = new URL('../../assets/samples/', import.meta.url);

/** The file of a shipped sample by its name, or null for any other name. */
export function sampleFile(name: string): string | null {
  if (!(SAMPLE_NAMES as readonly string[]).includes(name)) return null;
  const path = fileURLToPath(new URL(name, SAMPLES_DIR));
  return existsSync(path) ? path : null;
}

function parse(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/** The local file a URL of the form `http(s)://HOST/samples/NAME` names, whatever HOST; else null. */
function sampleNamedBy(url: URL): string | null {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (!url.pathname.startsWith(SAMPLE_PATH_PREFIX) || url.search !== '') return null;
  return sampleFile(url.pathname.slice(SAMPLE_PATH_PREFIX.length));
}

/** Where a request arrived: the local end of its socket (never what its Host header claims). */
export interface ArrivedAt {
  localAddress: string | undefined;
  localPort: number | undefined;
}

/**
 * POST /send with a sandbox key: the service's own sample, on the very address and port the request
 * came to (the local end of its socket), may be named even when private addresses are refused — that
 * is how the quick start's `http://localhost:3000/samples/hello.ogg` works out of the box. The Host
 * header is not trusted: any client can write any name there. Live keys never get this exception:
 * for them a private address stays refused.
 */
export function isOwnSampleUrl(audioUrl: string, arrivedAt: ArrivedAt): boolean {
  const url = parse(audioUrl);
  if (!url || arrivedAt.localAddress === undefined || arrivedAt.localPort === undefined || sampleNamedBy(url) === null) return false;
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return port === arrivedAt.localPort && sameAddress(url.hostname, arrivedAt.localAddress);
}

/**
 * The refusal of a sample URL the sandbox exception did not cover (another port or address than the
 * request came to, or a live key): the URL to use instead, rather than advice to allow private addresses
 * (a security check turned off for what is only a wrong port). Null when the URL names no shipped sample.
 */
export function sampleUrlAdvice(audioUrl: string, arrivedAt: ArrivedAt, sandbox: boolean): string | null {
  const url = parse(audioUrl);
  if (!url || sampleNamedBy(url) === null) return null;
  if (!sandbox) return `audio_url names the service's own sample, which only sandbox keys (sk_test_…) may send; a live send needs a public audio_url`;
  const right = ownOrigin(arrivedAt);
  if (right === null) return null;
  return `audio_url names the sample on ${url.host}, but this request came to ${right}: use ${right}${url.pathname}`;
}

/** `http://HOST:PORT` of the socket's local end; a loopback address is said as localhost (the README's form). */
function ownOrigin(arrivedAt: ArrivedAt): string | null {
  if (arrivedAt.localAddress === undefined || arrivedAt.localPort === undefined) return null;
  const local = plainAddress(arrivedAt.localAddress);
  const host = isLoopback(local) ? 'localhost' : isIP(local) === 6 ? `[${local}]` : local;
  return `http://${host}:${arrivedAt.localPort}`;
}

const LOOPBACK_NAME = /^(localhost|.+\.localhost)$/i;

/** An IPv4 address as Node reports it on a dual-stack socket (`::ffff:127.0.0.1`), without the wrapper. */
function plainAddress(address: string): string {
  const bare = address.replace(/^\[|\]$/g, '').toLowerCase();
  return bare.startsWith('::ffff:') && isIP(bare.slice(7)) === 4 ? bare.slice(7) : bare;
}

function isLoopback(address: string): boolean {
  return address === '::1' || /^127\.\d+\.\d+\.\d+$/.test(address);
}

/**
 * The URL's host names the socket's local address: the same IP literal, or, for a request that came
 * in on loopback, any loopback name or address (the README's `http://localhost:3000/…` reaches the
 * service that `voicenote send` calls at `http://127.0.0.1:3000`). Other names are not looked up.
 */
function sameAddress(hostname: string, localAddress: string): boolean {
  const local = plainAddress(localAddress);
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (isLoopback(local) && (LOOPBACK_NAME.test(host) || isLoopback(plainAddress(host)))) return true;
  return isIP(plainAddress(host)) !== 0 && plainAddress(host) === local;
}

/**
 * The worker, for a sandbox message: the shipped file to read instead of fetching, when the URL
 * names a sample on an address the fetcher would refuse (the API let it through as the service's
 * own sample). A worker in another process or on another machine reads its own identical copy, so
 * this works in split mode too. Public URLs are fetched as usual.
 */
export function localSampleFor(audioUrl: string): string | null {
  const url = parse(audioUrl);
  if (!url) return null;
  const file = sampleNamedBy(url);
  if (file === null) return null;
  const verdict = vetAudioUrl(url, { allowPrivate: false });
  return !verdict.ok && verdict.blocked ? file : null;
}
