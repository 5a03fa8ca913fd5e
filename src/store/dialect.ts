import { PostgresAdapter, sql, type Kysely, type RawBuilder } from 'kysely';

// Kept apart from db.ts, which opens connections and so imports every module it wires (the hot path,
// and through it the message queries): the queries import this instead, and no import runs in a circle.

export type Dialect = 'sqlite' | 'postgres';

/**
 * The database's clock, in epoch ms, as an SQL expression: leases, claims and due times are computed on
 * it, so processes whose own clocks disagree still agree. (clock_timestamp, not now(): now() is frozen at
 * the start of a transaction.) The dialect is read from the connection, so transactions work alike.
 */
export function dbNow(db: Kysely<any>): RawBuilder<number> {
  return sql<number>`${sql.raw(DB_NOW_SQL[dialectOf(db)])}`;
}

/** dbNow as SQL text, for statements written out once (fixed-statement.ts). */
export const DB_NOW_SQL: Record<Dialect, string> = {
  postgres: '(extract(epoch from clock_timestamp()) * 1000)::bigint',
  sqlite: "cast(unixepoch('subsec') * 1000 as integer)",
};

/** The dialect of a Kysely instance (a transaction's included), read from its connection's adapter. */
export function dialectOf(db: Kysely<any>): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}
