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
  const due = await db
    .selectFrom('whatsapp_sessions')
    .select(['id', 'account_id', 'env'])
    .where('env', '=', 'test')
    .where('status', '=', 'qr_pending')
    .where((eb) => eb.or([eb('auto_connect_at', '<=', now), eb('qr_expires_at', '<=', now)]))
    .limit(100)
    .execute();
  for (const row of due) await sessions.get({ accountId: row.account_id, env: row.env }, row.id);
  return due.length;
}

/** The same for sandbox Telegram account sessions (`ts_…`). */
export async function sweepDueSandboxTelegramSessions(db: Kysely<Database>, sessions: TelegramSessions, now = Date.now()): Promise<number> {
  const due = await db
    .selectFrom('telegram_sessions')
    .select(['id', 'account_id', 'env'])
    .where('env', '=', 'test')
    .where('status', '=', 'qr_pending')
    .where((eb) => eb.or([eb('auto_connect_at', '<=', now), eb('qr_expires_at', '<=', now)]))
    .limit(100)
    .execute();
  for (const row of due) await sessions.get({ accountId: row.account_id, env: row.env }, row.id);
  return due.length;
}
