import { sql, type Kysely } from 'kysely';

// At most one owner account: two processes starting at once on an empty database must not both
// create one (the loser of the race sees the unique violation and prints nothing).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('accounts_one_owner')
    .on('accounts')
    .column('is_owner')
    .unique()
    .where(sql.ref('is_owner'), '=', 1)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('accounts_one_owner').execute();
}
