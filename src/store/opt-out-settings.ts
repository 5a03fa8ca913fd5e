import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** How an account and environment hear opt-outs by reply. */
export interface OptOutSettings {
  enabled: boolean;
  /** The account's own keywords, folded (core/opt-out-keywords.ts foldKeyword), beside the built-in ones. */
  keywords: string[];
}

/** No row: on, with the built-in keywords only. */
export const DEFAULT_OPT_OUT_SETTINGS: OptOutSettings = { enabled: true, keywords: [] };

export async function readOptOutSettings(db: Kysely<Database>, owner: { accountId: string; env: string }): Promise<OptOutSettings> {
  const row = await db.selectFrom('opt_out_settings').select(['enabled', 'keywords']).where('account_id', '=', owner.accountId).where('env', '=', owner.env).executeTakeFirst();
  if (!row) return { ...DEFAULT_OPT_OUT_SETTINGS, keywords: [] };
  return { enabled: Number(row.enabled) === 1, keywords: JSON.parse(row.keywords) as string[] };
}

export async function writeOptOutSettings(db: Kysely<Database>, owner: { accountId: string; env: string }, settings: OptOutSettings, now: number): Promise<void> {
  const values = { enabled: settings.enabled ? 1 : 0, keywords: JSON.stringify(settings.keywords), updated_at: now };
  await db
    .insertInto('opt_out_settings')
    .values({ account_id: owner.accountId, env: owner.env, ...values })
    .onConflict((oc) => oc.columns(['account_id', 'env']).doUpdateSet(values))
    .execute();
}
