import { forbiddenAddressReason, isIpLiteral } from './ip-ranges.js';

export const MAX_AUDIO_URL_LENGTH = 2048;

export type UrlVerdict =
  | { ok: true; url: URL }
  | { ok: false; blocked: boolean; message: string };

/** Decides whether an address may be contacted; swapped in tests to stand a loopback server in for a public host. */
export type AddressPolicy = (address: string) => string | null;

function isLocalName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost') || h === 'localhost.localdomain';
}

/**
 * Vets one URL (the request's, or a redirect hop's). Relies on the WHATWG parser having
 * already normalised numeric tricks (0x7f.1, 2130706433, 127.1, [::ffff:127.0.0.1]) to
 * canonical literals, which is also what undici will connect to.
 */
export function vetAudioUrl(
  raw: string | URL,
  opts: { allowPrivate: boolean; addressPolicy?: AddressPolicy },
): UrlVerdict {
  const text = typeof raw === 'string' ? raw : raw.href;
  if (text.length > MAX_AUDIO_URL_LENGTH) {
    return { ok: false, blocked: false, message: `audio_url is longer than ${MAX_AUDIO_URL_LENGTH} characters` };
  }
  let url: URL;
  try {
    url = typeof raw === 'string' ? new URL(raw) : raw;
  } catch {
    return { ok: false, blocked: false, message: 'audio_url is not a valid URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { ok: false, blocked: false, message: 'audio_url must use http or https' };
  }
  if (url.hostname === '') {
    return { ok: false, blocked: false, message: 'audio_url has no host' };
  }
  if (!opts.allowPrivate) {
    if (isIpLiteral(url.hostname)) {
      const reason = (opts.addressPolicy ?? forbiddenAddressReason)(url.hostname);
      if (reason !== null) return { ok: false, blocked: true, message: `audio_url points to a non-public address: ${reason}` };
    } else if (isLocalName(url.hostname)) {
      return { ok: false, blocked: true, message: `audio_url points to a local host name (${url.hostname})` };
    }
  }
  return { ok: true, url };
}

/** Appended to a refusal of a private address (audio and webhook URLs alike): the one switch that allows it. */
export const PRIVATE_URLS_HINT = '; to allow private addresses in development, set ALLOW_PRIVATE_URLS=true';

/** Synchronous check for POST /send: null when acceptable, else a message for a 422. */
export function checkAudioUrl(url: string, opts: { allowPrivate: boolean }): string | null {
  const verdict = vetAudioUrl(url, { allowPrivate: opts.allowPrivate });
  if (verdict.ok) return null;
  // The usual cause is a developer serving audio from their own machine: say how to allow that.
  return verdict.blocked ? `${verdict.message}${PRIVATE_URLS_HINT}` : verdict.message;
}
