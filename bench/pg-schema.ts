import pg from 'pg';

/** Drops a bench run's own PostgreSQL schema, with everything in it (the run's fresh storage). */
export async function dropSchema(connectionString: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    await client.query(`drop schema if exists ${schema} cascade`);
  } finally {
    await client.end();
  }
}
