/** The reliability runs' PostgreSQL database (dropped and made anew for each run) and Redis, and queries on it. */
import pg from 'pg';

export const PG_ADMIN_URL = process.env.REL_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const PG_DB = process.env.REL_PG_DB ?? 'voicenote_rel';
export const PG_URL = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${PG_DB}`);
export const REDIS_URL = process.env.REL_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A fresh database for the run (dropped and created again). */
export async function freshDatabase(): Promise<void> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    await client.query(`drop database if exists ${PG_DB} with (force)`);
    await client.query(`create database ${PG_DB}`);
  } finally {
    await client.end();
  }
}

export async function query<T = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as T[];
  } finally {
    await client.end();
  }
}
