/**
 * What linkedin.com's web app sends about the browser it runs in, on every Voyager call
 * (docs/platforms.md, "LinkedIn"): the User-Agent, `x-li-track`, `x-li-lang`, `x-li-page-instance` and
 * a Referer of a messaging page. The session's own browser is used where the caller tells us what it is
 * (`session.user_agent`, and its `lang` and `timezone` cookies inside `session.cookies`).
 */
import { randomBytes } from 'node:crypto';

/**
 * A current desktop Chrome on Windows, for sessions that do not name their browser. Last brought up to
 * date on 2026-11-25 (Chrome 152; check the stable version when updating, and the date here).
 */
export const DEFAULT_USER_AGENT = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/152.0.0.0 Safari/537.36';
export const DEFAULT_USER_AGENT_UPDATED = '2026-11-25';

/** The web app's version in `x-li-track` (`clientVersion` and `mpVersion`), as seen in public captures of 2026. */
export const WEB_CLIENT_VERSION = '1.13.42216';

/** A desktop screen, for `x-li-track`: the most common one. */
const DISPLAY = { displayDensity: 1, displayWidth: 1920, displayHeight: 1080 } as const;

/** The browser a delivery speaks as. */
export interface BrowserIdentity {
  userAgent: string;
  /** `sec-ch-ua`, `sec-ch-ua-mobile`, `sec-ch-ua-platform` as that browser sends them (none for Firefox or Safari). */
  clientHints: Record<string, string>;
  /** `x-li-lang`, e.g. `en_US`. */
  lang: string;
  /** `accept-language`, from the same language. */
  acceptLanguage: string;
  /** `x-li-track`, the JSON text. */
  track: string;
  /** `x-li-page-instance` of the messaging page the calls come from. */
  pageInstance: string;
  /** `Referer`: that messaging page. */
  referer: string;
}

function validTimeZone(zone: string | undefined): string | undefined {
  if (zone === undefined || zone === '') return undefined;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

/** The zone's offset from UTC at `at`, in hours (what the web app puts in `timezoneOffset`: -4 for New York in summer). */
export function offsetHours(timeZone: string, at: Date): number {
  const name = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' }).formatToParts(at).find((p) => p.type === 'timeZoneName')?.value ?? '';
  const match = /GMT([+-])(\d{1,2}):?(\d{2})?/.exec(name);
  if (!match) return 0;
  const hours = Number(match[2]) + Number(match[3] ?? 0) / 60;
  return match[1] === '-' ? -hours : hours;
}

/** `x-li-lang` from LinkedIn's `lang` cookie (`v=2&lang=en-us`); `en_US` without one. */
export function liLang(langCookie: string | undefined): string {
  const match = /(?:^|&)lang=([a-z]{2})[-_]([a-z]{2})(?:&|$)/i.exec(langCookie ?? '');
  return match ? `${match[1]!.toLowerCase()}_${match[2]!.toUpperCase()}` : 'en_US';
}

/** The `x-li-track` JSON of the web app, with its ten keys in the web app's order. */
export function liTrack(timeZone: string, at: Date): string {
  return JSON.stringify({
    clientVersion: WEB_CLIENT_VERSION,
    mpVersion: WEB_CLIENT_VERSION,
    osName: 'web',
    timezoneOffset: offsetHours(timeZone, at),
    timezone: timeZone,
    deviceFormFactor: 'DESKTOP',
    mpName: 'voyager-web',
    ...DISPLAY,
  });
}

// Chromium's GREASE brand (GetGreasedUserAgentBrandVersion): its characters, version and place in the
// list follow from the major version, so a hint list that does not match its version is a tell.
const GREASE_CHARS = [' ', '(', ':', '-', '.', '/', ')', ';', '=', '?', '_'];
const GREASE_VERSIONS = ['8', '99', '24'];
const BRAND_ORDERS = [
  [0, 1, 2],
  [0, 2, 1],
  [1, 0, 2],
  [1, 2, 0],
  [2, 0, 1],
  [2, 1, 0],
] as const;

/**
 * The User-Agent Client Hints a Chromium browser sends with this User-Agent (mautrix/linkedin PR #61:
 * hints that contradict the User-Agent are what LinkedIn reads as a stolen session). Firefox and
 * Safari send none, and neither do we for them.
 */
export function clientHints(userAgent: string): Record<string, string> {
  const chromium = /(?:Chrome|CriOS)\/(\d+)\./.exec(userAgent);
  if (!chromium || /Firefox\/|FxiOS\//.test(userAgent)) return {};
  const major = Number(chromium[1]);
  const edge = /Edg(?:A|iOS)?\/(\d+)\./.exec(userAgent);
  const brand = edge ? { name: 'Microsoft Edge', version: edge[1]! } : { name: 'Google Chrome', version: String(major) };
  const grease = {
    name: `Not${GREASE_CHARS[major % GREASE_CHARS.length]}A${GREASE_CHARS[(major + 1) % GREASE_CHARS.length]}Brand`,
    version: GREASE_VERSIONS[major % GREASE_VERSIONS.length]!,
  };
  const order = BRAND_ORDERS[major % BRAND_ORDERS.length]!;
  const list: Array<{ name: string; version: string }> = [];
  list[order[0]] = grease;
  list[order[1]] = { name: 'Chromium', version: String(major) };
  list[order[2]] = brand;
  const platform = /Android/.test(userAgent)
    ? 'Android'
    : /Windows/.test(userAgent)
      ? 'Windows'
      : /Macintosh|Mac OS X/.test(userAgent)
        ? 'macOS'
        : /CrOS/.test(userAgent)
          ? 'Chrome OS'
          : /Linux|X11/.test(userAgent)
            ? 'Linux'
            : 'Unknown';
  return {
    'sec-ch-ua': list.map((b) => `"${b.name}";v="${b.version}"`).join(', '),
    'sec-ch-ua-mobile': /Mobile/.test(userAgent) ? '?1' : '?0',
    'sec-ch-ua-platform': `"${platform}"`,
  };
}

/** A page instance as the web app makes one per page view: the page's name, then 16 random bytes in base64. */
export function newPageInstance(): string {
  return `urn:li:page:d_flagship3_messaging_conversation_detail;${randomBytes(16).toString('base64')}`;
}

/**
 * The browser of one delivery. `timezoneCookie` and `langCookie` are LinkedIn's own cookies of that
 * browser when the caller passed them; otherwise the zone is this server's and the language en_US.
 */
export function browserIdentity(input: {
  userAgent: string | undefined;
  langCookie: string | undefined;
  timezoneCookie: string | undefined;
  referer: string;
  at?: Date;
}): BrowserIdentity {
  let decodedZone: string | undefined;
  try {
    decodedZone = input.timezoneCookie === undefined ? undefined : decodeURIComponent(input.timezoneCookie);
  } catch {
    decodedZone = undefined;
  }
  const zone = validTimeZone(decodedZone) ?? validTimeZone(Intl.DateTimeFormat().resolvedOptions().timeZone) ?? 'UTC';
  const lang = liLang(input.langCookie);
  const [language] = lang.split('_');
  const userAgent = input.userAgent ?? DEFAULT_USER_AGENT;
  return {
    userAgent,
    clientHints: clientHints(userAgent),
    lang,
    acceptLanguage: `${lang.replace('_', '-')},${language};q=0.9`,
    track: liTrack(zone, input.at ?? new Date()),
    pageInstance: newPageInstance(),
    referer: input.referer,
  };
}
