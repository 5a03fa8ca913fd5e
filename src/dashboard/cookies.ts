import type { FastifyRequest } from 'fastify';

/** Cookies of a request, by name (the first of duplicates wins). */
export function readCookies(request: FastifyRequest): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    if (cookies.has(name)) continue;
    try {
      const value = decodeURIComponent(part.slice(eq + 1).trim());
      // None of ours holds a NUL (and PostgreSQL text cannot): such a cookie is nobody's session.
      if (!value.includes('\u0000')) cookies.set(name, value);
    } catch {
      // A cookie that is not valid percent-encoding is nobody's cookie of ours.
    }
  }
  return cookies;
}

export interface CookieOptions {
  maxAgeSeconds: number;
  secure: boolean;
  sameSite: 'Lax' | 'Strict';
}

/** Every dashboard cookie: HttpOnly, scoped to /dashboard, Secure whenever the request came over TLS. */
export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  const parts = [`${name}=${encodeURIComponent(value)}`, 'Path=/dashboard', `Max-Age=${options.maxAgeSeconds}`, 'HttpOnly', `SameSite=${options.sameSite}`];
  if (options.secure) parts.push('Secure');
  return parts.join('; ');
}

/**
 * Whether the browser reached us over TLS. `request.protocol` honours X-Forwarded-Proto only when the
 * server trusts its proxy, so a client cannot talk us out of (or into) Secure cookies by a header.
 */
export const overTls = (request: FastifyRequest): boolean => request.protocol === 'https';
