import type { Kysely } from 'kysely';
import type { WhatsappSessions } from '../platforms/whatsapp/sessions.js';
import type { TelegramSessions } from '../platforms/telegram/account/sessions.js';
import type { Database } from '../store/schema.js';

/**
 * Sandbox sessions change status on a timer (auto-scan, QR expiry) that is applied when someone
 * looks at them. Webhook subscribers are told of every change, so this looks at the ones whose
 * time has come, whether or not anyone polls. The move itself is a compare-and-set: processes
 * sweeping at once apply it once.
 */
export async function sweepDueSandboxSessions(db: Kysely<Database>, sessions: WhatsappSessions, now = Date.now()): Promise<number> {
  return sweepDue(db, 'whatsapp_sessions', (owner, id) => sessions.get(owner, id), now);
}

/** The same for sandbox Telegram account sessions (`ts_…`). */
export async function sweepDueSandboxTelegramSessions(db: Kysely<Database>, sessions: TelegramSessions, now = Date.now()): Promise<number> {
  return sweepDue(db, 'telegram_sessions', (owner, id) => sessions.get(owner, id), now);
}

/** Looks at (so moves) the sandbox sessions of one table whose timed move is due; both tables keep the same timers. */
async function sweepDue(
  db: Kysely<Database>,
  table: 'whatsapp_sessions' | 'telegram_sessions',
  look: (owner: { accountId: string; env: string }, id: string) => Promise<unknown>,
  now: number,
): Promise<number> {
  const due = await db
    .selectFrom(table)
    .select(['id', 'account_id', 'env'])
    .where('env', '=', 'test')
    .where('status', '=', 'qr_pending')
    .where((eb) => eb.or([eb('auto_connect_at', '<=', now), eb('qr_expires_at', '<=', now)]))
    .limit(100)
    .execute();
  for (const row of due) await look({ accountId: row.account_id, env: row.env }, row.id);
  return due.length;
}
