import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../services.js';
import type { DashboardContext } from './context.js';
import type { Section } from './layout.js';

/** What every dashboard page module is given. */
export interface DashboardDeps {
  services: Services;
  /** The sections this build shows (navigation and pages). */
  sections: ReadonlySet<Section>;
}

/** A form body as the dashboard parses it: repeated fields become arrays. */
export type FormBody = Record<string, string | string[]>;

export function field(body: unknown, name: string): string {
  if (body === null || typeof body !== 'object') return '';
  const value = (body as FormBody)[name];
  if (Array.isArray(value)) return value[0] ?? '';
  return typeof value === 'string' ? value : '';
}

export function fields(body: unknown, name: string): string[] {
  if (body === null || typeof body !== 'object') return [];
  const value = (body as FormBody)[name];
  if (Array.isArray(value)) return value;
  return typeof value === 'string' ? [value] : [];
}

/** The signed-in context; the dashboard's auth hook has set it on every route past sign-in. */
export const ctxOf = (request: FastifyRequest): DashboardContext => request.dashboard!;

/** After a change: back to a page (303 so the browser GETs it), with a notice code it knows how to word. */
export const redirectTo = (reply: FastifyReply, location: string): FastifyReply => reply.code(303).header('Location', location).send();

/** An application/x-www-form-urlencoded body: a name given twice is a list. */
export function parseForm(text: string): FormBody {
  const body: FormBody = {};
  for (const [name, value] of new URLSearchParams(text)) {
    const seen = body[name];
    if (seen === undefined) body[name] = value;
    else body[name] = Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return body;
}
