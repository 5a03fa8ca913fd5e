/**
 * The browser's cookies for linkedin.com, and the ones LinkedIn sets while a delivery runs.
 *
 * A caller may hand over the whole `Cookie` header of the browser that holds the session
 * (`session.cookies`); its cookies go out on every call, with `li_at` and `JSESSIONID` among them.
 * Cookies LinkedIn sets on any answer (`Set-Cookie`) replace them for the following calls of the same
 * delivery, as in the browser: the jar is tough-cookie's, which reads `Set-Cookie` (expiry, deletion,
 * domain and path matching) as RFC 6265 says, so cookies never go to another host than theirs.
 */
import { createRequire } from 'node:module';
import type * as ToughCookie from 'tough-cookie';

// Loaded at the first LinkedIn delivery, not at start: most processes (a worker for Telegram or
// WhatsApp only, every CLI command) never use it, and loading it took about 70 ms of each start.
let toughCookie: typeof ToughCookie | undefined;
const loadToughCookie = (): typeof ToughCookie => (toughCookie ??= createRequire(import.meta.url)('tough-cookie') as typeof ToughCookie);

export interface CookiePair {
  name: string;
  value: string;
}

/** The longest `session.cookies` taken: a browser's linkedin.com cookies are a few KB. */
export const MAX_COOKIE_HEADER_LENGTH = 16_384;
const MAX_COOKIES = 200;
// RFC 7230 token: what a cookie name may hold.
const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Printable ASCII without ";" (the separator): anything else would not survive as a header.
const COOKIE_VALUE = /^[\x20-\x3a\x3c-\x7e]*$/;

/** The pairs of a `Cookie` header, in order; a string naming what is wrong when it is not one. */
export function parseCookieHeader(header: string): CookiePair[] | string {
  if (header.length > MAX_COOKIE_HEADER_LENGTH) return `at most ${MAX_COOKIE_HEADER_LENGTH} characters`;
  const pairs: CookiePair[] = [];
  for (const part of header.split(';')) {
    const text = part.trim();
    if (text === '') continue;
    const eq = text.indexOf('=');
    if (eq <= 0) return 'a Cookie header: name=value pairs separated by "; "';
    const name = text.slice(0, eq).trim();
    const value = text.slice(eq + 1).trim();
    if (!COOKIE_NAME.test(name)) return 'a Cookie header: cookie names are letters, digits and !#$%&\'*+.^_`|~-';
    if (!COOKIE_VALUE.test(value)) return 'a Cookie header: cookie values are printable ASCII without ";"';
    pairs.push({ name, value });
  }
  if (pairs.length === 0) return 'a Cookie header with at least one name=value pair';
  if (pairs.length > MAX_COOKIES) return `a Cookie header of at most ${MAX_COOKIES} cookies`;
  return pairs;
}

/** A cookie value without its optional double quotes (JSESSIONID is sent as `"ajax:…"`). */
export const unquoted = (value: string): string => (value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value);

/** The cookies of one delivery: the browser's to begin with, then whatever LinkedIn sets. */
export class DeliveryCookies {
  readonly #jar: ToughCookie.CookieJar = new (loadToughCookie().CookieJar)(undefined, { looseMode: true });
  readonly #origin: string;

  private constructor(origin: string) {
    this.#origin = origin;
  }

  /**
   * From the session: `cookies` when given (it agrees with `li_at` and `csrf_token`: rules.ts checks),
   * plus `li_at` and `JSESSIONID` when it lacks them. A `Cookie` header says nothing of domains, so they
   * are kept as the API host's own cookies, as the browser sent them to it.
   */
  static async of(apiRoot: string, session: { li_at: string; csrf_token: string; cookies?: string | undefined }): Promise<DeliveryCookies> {
    const origin = new URL(apiRoot).origin;
    const cookies = new DeliveryCookies(origin);
    const given = session.cookies === undefined ? [] : parseCookieHeader(session.cookies);
    const pairs: CookiePair[] = typeof given === 'string' ? [] : [...given];
    if (!pairs.some((p) => p.name === 'li_at')) pairs.push({ name: 'li_at', value: session.li_at });
    if (!pairs.some((p) => p.name === 'JSESSIONID')) pairs.push({ name: 'JSESSIONID', value: `"${session.csrf_token}"` });
    for (const { name, value } of pairs) {
      const cookie = new (loadToughCookie().Cookie)({ key: name, value, path: '/' });
      await cookies.#jar.setCookie(cookie, `${origin}/`, { ignoreError: true });
    }
    return cookies;
  }

  /** The `Cookie` header for a request to `url` (empty when no cookie belongs to that host). */
  header(url: string | URL): Promise<string> {
    return this.#jar.getCookieString(String(url));
  }

  /** The value of one cookie as the API host would get it, without quotes. */
  async value(name: string): Promise<string | undefined> {
    const found = (await this.#jar.getCookies(`${this.#origin}/`)).find((c) => c.key === name);
    return found === undefined ? undefined : unquoted(found.value);
  }

  /**
   * Takes the `Set-Cookie` headers of an answer to `url`. A cookie that LinkedIn sets replaces any other
   * of the same name and path: the browser's were stored without their domain, and sending both the old
   * and the new value would be what no browser does.
   */
  async absorb(url: string | URL, setCookie: string | string[] | undefined): Promise<void> {
    if (setCookie === undefined) return;
    const store = this.#jar.store;
    for (const header of Array.isArray(setCookie) ? setCookie : [setCookie]) {
      const cookie = loadToughCookie().Cookie.parse(header, { loose: true });
      if (!cookie) continue;
      const stored = await this.#jar.setCookie(cookie, String(url), { ignoreError: true });
      if (!stored) continue;
      for (const other of await this.#jar.getCookies(String(url), { expire: false })) {
        if (other.key === stored.key && other.path === stored.path && other.domain !== stored.domain && other.domain !== null && other.path !== null) {
          await store.removeCookie(other.domain, other.path, other.key);
        }
      }
    }
  }

  /** LinkedIn ended the session: it deleted `li_at` (expired it, or set it to "delete me"). */
  async signedOut(): Promise<boolean> {
    const liAt = await this.value('li_at');
    return liAt === undefined || liAt === '' || liAt === 'delete me';
  }
}
