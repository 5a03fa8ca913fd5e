import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyEnv } from '../core/ids.js';
import type { AccountRow } from '../store/accounts.js';
import { findDashboardSession } from '../store/dashboard-sessions.js';
import type { Services } from '../services.js';
import { readCookies } from './cookies.js';

export const SESSION_COOKIE = 'vn_session';
/** Before sign-in there is no session: the form is tied to this short-lived random cookie instead. */
export const SIGN_IN_COOKIE = 'vn_signin';
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** Who the dashboard acts for on this request, and in which environment. */
export interface DashboardContext {
  account: AccountRow;
  env: KeyEnv;
  /** The cookie's token (never stored as such). */
  token: string;
  /** The CSRF token every form of this sign-in carries. */
  csrf: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    dashboard: DashboardContext | null;
  }
}

/** A CSRF token bound to the sign-in: an HMAC of its cookie token, so it needs no storage and dies with it. */
export const csrfTokenFor = (sessionToken: string): string => createHmac('sha256', sessionToken).update('voicenote dashboard csrf').digest('base64url');

export function sameToken(given: unknown, expected: string): boolean {
  if (typeof given !== 'string' || given.length === 0) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A POST from a page of another site: browsers send Origin on every form POST, so one that names
 * another host is refused even before the token is looked at.
 */
export function crossOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  if (origin === undefined || origin === 'null') return origin === 'null';
  try {
    return new URL(origin).host !== request.headers.host;
  } catch {
    return true;
  }
}

/** Resolves the sign-in of the request's cookie; undefined when there is none (or it expired). */
export async function loadContext(services: Services, request: FastifyRequest): Promise<DashboardContext | undefined> {
  const token = readCookies(request).get(SESSION_COOKIE);
  if (!token || token.length > 200) return undefined;
  const found = await findDashboardSession(services.db.kysely, token, Date.now());
  if (!found) return undefined;
  return { account: found.account, env: found.session.env === 'live' ? 'live' : 'test', token, csrf: csrfTokenFor(token) };
}

/** Where a signed-out visitor goes. */
export function toSignIn(reply: FastifyReply): FastifyReply {
  return reply.code(303).header('Location', '/dashboard/sign-in').send();
}
