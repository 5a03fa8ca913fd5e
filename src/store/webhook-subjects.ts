import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** What one webhook event was about: the voice note or the WhatsApp session its data names. */
export interface EventSubject {
  kind: 'message' | 'session';
  id: string;
  /** A test event sent from the endpoint's page: its data is a sample, not one of the account's own. */
  test: boolean;
}

/** The subjects of the given events of one account and environment, read from their stored bodies. */
export async function eventSubjects(
  db: Kysely<Database>,
  owner: { accountId: string; env: string },
  eventIds: readonly string[],
): Promise<Map<string, EventSubject>> {
  const subjects = new Map<string, EventSubject>();
  if (eventIds.length === 0) return subjects;
  const rows = await db
    .selectFrom('webhook_events')
    .select(['id', 'payload', 'endpoint_id'])
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .where('id', 'in', [...new Set(eventIds)])
    .execute();
  for (const row of rows) {
    const subject = subjectOf(row.payload, row.endpoint_id !== null);
    if (subject) subjects.set(row.id, subject);
  }
  return subjects;
}

function subjectOf(payload: string, test: boolean): EventSubject | undefined {
  try {
    const data = (JSON.parse(payload) as { data?: { id?: unknown; session_id?: unknown } }).data;
    if (typeof data?.id === 'string') return { kind: 'message', id: data.id, test };
    if (typeof data?.session_id === 'string') return { kind: 'session', id: data.session_id, test };
  } catch {
    // a body that is not JSON names nothing
  }
  return undefined;
}
