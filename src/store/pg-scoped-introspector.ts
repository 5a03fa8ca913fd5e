import { PostgresDialect, sql, type DatabaseIntrospector, type DatabaseMetadata, type Kysely, type SchemaMetadata, type TableMetadata } from 'kysely';

/**
 * PostgreSQL with an introspector that sees the tables of the connection's own schema only.
 *
 * Kysely's migrator asks the introspector whether its two tables exist, and Kysely's own introspector
 * reads every column of every schema of the database, calling `pg_get_serial_sequence` on each table.
 * When another user of the same database drops a schema meanwhile (another app's, a test's), that call
 * meets a table that is gone and fails the start with 42P01 ("relation … does not exist") or 3F000.
 * The migrator needs names only, in the schema it works in: this reads exactly that.
 */
export class SchemaScopedPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new CurrentSchemaIntrospector(db);
  }
}

class CurrentSchemaIntrospector implements DatabaseIntrospector {
  constructor(private readonly db: Kysely<any>) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace`.execute(this.db);
    return rows.map((row) => ({ name: row.name }));
  }

  /** The tables and views of the current schema, by name; their columns are not read (nothing here needs them). */
  async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ name: string; schema: string; is_view: boolean }>`
      select c.relname as name, ns.nspname as schema, c.relkind = 'v' as is_view
      from pg_catalog.pg_class c join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
      where ns.nspname = current_schema() and c.relkind in ('r', 'v', 'p')
      order by c.relname`.execute(this.db);
    return rows.map((row) => ({ name: row.name, schema: row.schema, isView: row.is_view, columns: [] }));
  }

  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() };
  }
}
