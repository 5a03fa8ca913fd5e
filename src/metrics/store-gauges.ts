import type { Kysely } from 'kysely';
import { PLATFORM_NAMES as PLATFORMS } from '../platforms/registry.js';
import type { Database } from '../store/schema.js';

export interface QueueSnapshot {
  depth: { platform: string; status: string; count: number }[];
  oldestDue: { platform: string; ageSeconds: number }[];
}


/**
 * The queue as Prometheus sees it: unsettled messages by platform and status, and per platform the
 * age of the oldest message that is due and that no live lease holds (what waits for a worker).
 */
export async function queueSnapshot(db: Kysely<Database>, now: number): Promise<QueueSnapshot> {
  const depthRows = await db
    .selectFrom('messages')
    .select((eb) => ['platform', 'status', eb.fn.countAll<number | string>().as('count')])
    .where('status', 'in', ['queued', 'processing'])
    .groupBy(['platform', 'status'])
    .execute();
  const dueRows = await db
    .selectFrom('messages')
    .select((eb) => ['platform', eb.fn.min<number | string>('next_attempt_at').as('oldest')])
    .where('status', 'in', ['queued', 'processing'])
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', now)]))
    .groupBy('platform')
    .execute();
  const oldest = new Map(dueRows.map((r) => [r.platform, Number(r.oldest)]));
  return {
    depth: depthRows.map((r) => ({ platform: r.platform, status: r.status, count: Number(r.count) })),
    // Every platform is listed, 0 when nothing waits: an alert on the age then has a series to read.
    oldestDue: [...new Set([...PLATFORMS, ...oldest.keys()])].map((platform) => {
      const at = oldest.get(platform);
      return { platform, ageSeconds: at === undefined ? 0 : Math.max(0, (now - at) / 1000) };
    }),
  };
}

export async function whatsappSessionCounts(db: Kysely<Database>): Promise<{ env: string; status: string; count: number }[]> {
  const rows = await db
    .selectFrom('whatsapp_sessions')
    .select((eb) => ['env', 'status', eb.fn.countAll<number | string>().as('count')])
    .groupBy(['env', 'status'])
    .execute();
  return rows.map((r) => ({ env: r.env, status: r.status, count: Number(r.count) }));
}
