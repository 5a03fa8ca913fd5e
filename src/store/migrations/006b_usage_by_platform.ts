import { sql, type Kysely } from 'kysely';

// Sends per platform as rows keyed by the platform's name, so a new platform needs no migration.
// Today's per-platform columns of usage_periods move here (zero counts are simply absent rows).
const OLD_COLUMNS = ['linkedin', 'telegram', 'whatsapp'] as const;

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('usage_by_platform')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env', 'text', (c) => c.notNull())
    .addColumn('period_start', 'bigint', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('sent', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('usage_by_platform_pk', ['account_id', 'env', 'period_start', 'platform'])
    .execute();
  for (const column of OLD_COLUMNS) {
    await sql`insert into usage_by_platform (account_id, env, period_start, platform, sent)
              select account_id, env, period_start, ${column}, ${sql.ref(column)} from usage_periods
              where ${sql.ref(column)} > 0`.execute(db);
  }
  for (const column of OLD_COLUMNS) await db.schema.alterTable('usage_periods').dropColumn(column).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const column of OLD_COLUMNS) {
    await db.schema.alterTable('usage_periods').addColumn(column, 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await sql`update usage_periods set ${sql.ref(column)} = coalesce((select sent from usage_by_platform u
              where u.account_id = usage_periods.account_id and u.env = usage_periods.env
              and u.period_start = usage_periods.period_start and u.platform = ${column}), 0)`.execute(db);
  }
  await db.schema.dropTable('usage_by_platform').execute();
}
