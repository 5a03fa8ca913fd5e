import type { Kysely } from 'kysely';

// What a linked Telegram account (`ts_…`) keeps beside its session row.
//  - `telegram_update_states`: the account's update state (pts, qts, date, seq), as Telegram defines it
//    (core.telegram.org/api/updates): updates.getDifference from it after a restart, a takeover or a
//    reconnect gives what arrived while no connection listened. `peer_flood_rest_ms`: the length of the
//    last PEER_FLOOD rest (each repeat doubles it). One row per session, made on first use.
//  - `telegram_peers`: each recipient of the session's notes, resolved once (user id and access hash,
//    which are per account), so that later notes to them make no look-up call.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('telegram_update_states')
    .addColumn('session_id', 'text', (c) => c.primaryKey())
    .addColumn('pts', 'integer')
    .addColumn('qts', 'integer')
    .addColumn('date', 'integer')
    .addColumn('seq', 'integer')
    .addColumn('peer_flood_rest_ms', 'bigint')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('telegram_peers')
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('access_hash', 'text', (c) => c.notNull())
    .addColumn('resolved_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('telegram_peers_pk', ['session_id', 'recipient'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('telegram_peers').execute();
  await db.schema.dropTable('telegram_update_states').execute();
}
