import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { MAX_DAILY_CAP, MAX_WARMUP_DAYS } from '../core/rhythm.js';
import { normalWindow, WEEKDAYS, windowProblem, type SendWindow } from '../core/send-window.js';
import type { Services } from '../services.js';
import { findRhythm, saveRhythm } from '../store/rhythm.js';
import { applyRhythmChange, type RhythmChange } from '../store/rhythm-view.js';
import { findSendWindow, saveSendWindow } from '../store/send-windows.js';
import { invalidParameter, notFound } from './errors.js';
import { withErrors } from './schemas.js';
import { rejectUnknownFields } from './unknown-fields.js';

/**
 * The account's sending rhythm over HTTP (docs/sending.md, "Sending like a person" and "Send windows"):
 * per platform, each sender's daily cap and warm-up, and the send window notes keep to.
 */

const Warmup = Type.Object(
  { start: Type.Integer({ description: 'Notes a day on a new sender\'s first day' }), days: Type.Integer({ description: `Days to rise to the cap (1–${MAX_WARMUP_DAYS})` }) },
  { description: 'A new sender starts at `start` notes a day, rising evenly to the cap over `days` days; null: no warm-up' },
);
const SendWindowSchema = Type.Object(
  {
    days: Type.Array(Type.String({ enum: [...WEEKDAYS] }), { description: 'The weekdays the window opens on, in the window\'s time zone' }),
    start: Type.String({ description: 'HH:MM, local time in time_zone'}),
    end: Type.String({ description: 'HH:MM (up to 24:00), local time in time_zone; earlier than start runs past midnight (22:00-06:00 closes on the next day, the day listed being the day it opens); equal to start is refused'}),
    time_zone: Type.String({ description: 'An IANA time zone; its daylight-saving changes are followed (local hours stay local)'}),
  },
  { description: 'The days and hours notes on this platform may go; null: at any hour (the default)' },
);
export const RhythmItem = Type.Object({
  platform: Type.String(),
  daily_cap: Type.Union([Type.Integer(), Type.Null()], { description: 'At most this many live notes per sender and UTC day; null: no cap' }),
  warmup: Type.Union([Warmup, Type.Null()]),
  send_window: Type.Union([SendWindowSchema, Type.Null()]),
});
const RhythmList = Type.Object({ data: Type.Array(RhythmItem) });
const RhythmPatch = Type.Object({
  daily_cap: Type.Optional(Type.Union([Type.Integer(), Type.Null()], { description: `1–${MAX_DAILY_CAP}; null: no cap (and no warm-up)` })),
  warmup: Type.Optional(Type.Union([Warmup, Type.Null()])),
  send_window: Type.Optional(Type.Union([SendWindowSchema, Type.Null()])),
});
const PlatformParams = Type.Object({ platform: Type.String() });

const PATCH_FIELDS = ['daily_cap', 'warmup', 'send_window'] as const;

/** The change PATCH asks for, every value checked (422 naming the field at fault). */
function changeOf(body: Record<string, unknown>): { rhythm: RhythmChange; window?: SendWindow | null } {
  const rhythm: RhythmChange = {};
  if (body.daily_cap !== undefined) {
    const cap = body.daily_cap;
    if (cap !== null && (typeof cap !== 'number' || !Number.isInteger(cap) || cap < 1 || cap > MAX_DAILY_CAP)) {
      throw invalidParameter('daily_cap', `daily_cap must be a whole number from 1 to ${MAX_DAILY_CAP}, or null for no cap`);
    }
    rhythm.dailyCap = cap as number | null;
  }
  if (body.warmup !== undefined) rhythm.warmup = warmupOf(body.warmup);
  if (body.send_window === undefined) return { rhythm };
  if (body.send_window === null) return { rhythm, window: null };
  const problem = windowProblem(body.send_window);
  if (problem) throw invalidParameter(problem.field, problem.message);
  return { rhythm, window: normalWindow(body.send_window as SendWindow) };
}

function warmupOf(value: unknown): { start: number; days: number } | null {
  if (value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) throw invalidParameter('warmup', 'warmup must be an object with start and days, or null for no warm-up');
  const w = value as Record<string, unknown>;
  const unknown = Object.keys(w).find((k) => k !== 'start' && k !== 'days');
  if (unknown) throw invalidParameter(`warmup.${unknown}`, `warmup takes start and days; ${unknown} is not one of them`);
  if (typeof w.start !== 'number' || !Number.isInteger(w.start) || w.start < 1) throw invalidParameter('warmup.start', 'warmup.start must be a whole number of notes, at least 1');
  if (typeof w.days !== 'number' || !Number.isInteger(w.days) || w.days < 1 || w.days > MAX_WARMUP_DAYS) throw invalidParameter('warmup.days', `warmup.days must be a whole number from 1 to ${MAX_WARMUP_DAYS}`);
  return { start: w.start, days: w.days };
}

export function registerRhythmRoutes(app: FastifyInstance, services: Services): void {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();
  const db = services.db.kysely;
  const tags = ['rhythm'];

  async function itemOf(accountId: string, platform: string) {
    const [rhythm, window] = await Promise.all([findRhythm(db, accountId, platform, services.rhythmDefaults), findSendWindow(db, accountId, platform)]);
    return { platform, daily_cap: rhythm.dailyCap, warmup: rhythm.warmup, send_window: window };
  }

  function knownPlatform(name: string): string {
    if (!services.platforms.get(name)) throw notFound(`platform ${name}`);
    return name;
  }

  routes.get(
    '/rhythm',
    {
      schema: {
        summary: "The account's rhythm on each platform",
        description: "Each sender's daily cap and warm-up (live sends), and the send window notes keep to (live and sandbox), per platform.",
        tags,
        response: { 200: RhythmList, ...withErrors() },
      },
    },
    async (request) => ({ data: await Promise.all(services.platforms.names.map((p) => itemOf(request.caller!.accountId, p))) }),
  );

  routes.patch(
    '/rhythm/:platform',
    {
      schema: {
        summary: "Change the account's rhythm on one platform",
        description:
          'Each field given is changed, the others stay: daily_cap (null: no cap), warmup (null: none), send_window (null: none). Notes already waiting for a send window are weighed against the new one at once.',
        tags,
        params: PlatformParams,
        body: RhythmPatch,
        response: { 200: RhythmItem, ...withErrors(400, 404, 413, 415, 422) },
      },
      // Before the schema: unknown fields and bad values are answered as the API answers them elsewhere
      // (400 naming an unknown field; 422 naming the bad value), not with the schema's generic 400.
      preValidation: async (request) => {
        const body = request.body as Record<string, unknown> | null | undefined;
        rejectUnknownFields(body, PATCH_FIELDS);
        knownPlatform((request.params as { platform: string }).platform);
        changeOf(body ?? {});
      },
    },
    async (request) => {
      const accountId = request.caller!.accountId;
      const platform = knownPlatform(request.params.platform);
      const change = changeOf(request.body as Record<string, unknown>);
      if (change.rhythm.dailyCap !== undefined || change.rhythm.warmup !== undefined) {
        const applied = applyRhythmChange(await findRhythm(db, accountId, platform, services.rhythmDefaults), change.rhythm);
        if ('problem' in applied) throw invalidParameter(change.rhythm.warmup ? 'warmup' : 'daily_cap', applied.problem);
        await saveRhythm(db, accountId, platform, applied.rhythm);
      }
      if (change.window !== undefined) await saveSendWindow(db, accountId, platform, change.window);
      return itemOf(accountId, platform);
    },
  );
}
