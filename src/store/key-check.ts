import type { Kysely } from 'kysely';
import type { SecretBox } from '../core/secret-box.js';
import type { Database } from './schema.js';

const CHECK_NAME = 'secret_key_check';
const CHECK_PLAINTEXT = 'voicenote secret key check v1';

/** SECRET_KEY is not the key the stored credentials were sealed with: nothing sealed could be opened. */
export class SecretKeyMismatchError extends Error {
  constructor() {
    super(
      'SECRET_KEY: is not the key this database was sealed with (its stored credentials could not be opened); start with the original key',
    );
    this.name = 'SecretKeyMismatchError';
  }
}

/**
 * The right key or no start. The first start seals a known value with the key in use and stores it;
 * every later start must be able to open it. (A changed key would otherwise start fine and then fail
 * every message and WhatsApp session it touches.)
 */
export async function checkSecretKey(db: Kysely<Database>, secretBox: SecretBox): Promise<void> {
  let stored = await readCheck(db);
  if (stored === undefined) {
    // Two processes starting together on an empty database: the first insert wins, both check it.
    await db
      .insertInto('instance_settings')
      .values({ name: CHECK_NAME, value: secretBox.seal(CHECK_PLAINTEXT) })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    stored = await readCheck(db);
  }
  let opened: string | undefined;
  try {
    opened = stored === undefined ? undefined : secretBox.open(stored);
  } catch {
    opened = undefined;
  }
  if (opened !== CHECK_PLAINTEXT) throw new SecretKeyMismatchError();
}

async function readCheck(db: Kysely<Database>): Promise<string | undefined> {
  const row = await db.selectFrom('instance_settings').select('value').where('name', '=', CHECK_NAME).executeTakeFirst();
  return row?.value;
}
