import type { Kysely } from 'kysely';

// What an API key may do (docs/security.md, "Key scopes"): `scope` is full, send or read, and existing
// keys are full (the default) so that nothing they did before is refused now. `senders` is a JSON array
// of the senders the key may send from (snd_…, ws_…, ts_…); null: any sender of its account.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('api_keys')
    .addColumn('scope', 'text', (c) => c.notNull().defaultTo('full'))
    .execute();
  await db.schema.alterTable('api_keys').addColumn('senders', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('senders').execute();
  await db.schema.alterTable('api_keys').dropColumn('scope').execute();
}
