import { Command, InvalidArgumentError, Option } from 'commander';
import { KEY_SCOPES, KEY_SENDER_PATTERN, type KeyScope } from '../core/key-scopes.js';
import { findAccount } from '../store/accounts.js';
import { createKey, findKey, listKeys, revokeKey, rollKey } from '../store/keys.js';
import { LimitReachedError } from '../store/limits.js';
import { iso } from '../api/views.js';
import { CliError, out, json, withDb, parseDuration, keyView, config } from './common.js';

/** `keys create|list|roll|revoke`. */
export function registerKeyCommands(program: Command): void {
  const keys = program.command('keys').description('manage API keys');
  keys
    .command('create')
    .description('issue a new key')
    .requiredOption('--account <id>', 'account id')
    .addOption(
      new Option('--env <env>', 'test (sandbox) or live').choices(['test', 'live']).makeOptionMandatory(),
    )
    .addOption(new Option('--scope <scope>', 'read (GET only), send (send, cancel and read) or full').choices([...KEY_SCOPES]).default('full'))
    .option('--sender <id>', 'a sender the key may send from (snd_…, ws_… or ts_…); repeat for more; default: any', collectSender, [])
    .option('--json', 'print one JSON object')
    .action(async (options: { account: string; env: 'test' | 'live'; scope: KeyScope; sender: string[]; json?: boolean }) => {
      const issued = await withDb(config(), async (db) => {
        if (!(await findAccount(db.kysely, options.account))) throw new CliError(`no account ${options.account}`);
        return withinCap(() => createKey(db.kysely, options.account, options.env, Date.now(), { scope: options.scope, senders: options.sender }));
      });
      const view = keyView(issued.row);
      if (options.json) json({ id: issued.row.id, env: issued.row.env, secret: issued.secret, scope: view.scope, senders: view.senders });
      else out(`${issued.row.id}  ${issued.secret}  (shown once)  scope ${view.scope}${view.senders ? `, senders ${view.senders.join(' ')}` : ''}`);
    });
  keys
    .command('list')
    .description("list an account's keys")
    .requiredOption('--account <id>', 'account id')
    .option('--json', 'print one JSON object')
    .action(async (options: { account: string; json?: boolean }) => {
      const rows = await withDb(config(), async (db) => {
        if (!(await findAccount(db.kysely, options.account))) throw new CliError(`no account ${options.account}`);
        return listKeys(db.kysely, options.account);
      });
      if (options.json) {
        json({ keys: rows.map(keyView) });
        return;
      }
      for (const key of rows.map(keyView)) {
        const state = key.revoked_at ? `revoked ${key.revoked_at}` : key.expires_at ? `expires ${key.expires_at}` : 'active';
        const senders = key.senders ? `  senders ${key.senders.join(' ')}` : '';
        out(`${key.id}  ${key.env.padEnd(4)}  ${key.prefix}…  ${key.scope.padEnd(4)}  created ${key.created_at}  ${state}${senders}`);
      }
    });
  keys
    .command('roll <key_id>')
    .description('issue a successor; the old key stays valid until --expires-in has passed')
    .addOption(new Option('--expires-in <duration>', 'how long the old key keeps working').argParser(parseDuration).default(86_400_000, '24h'))
    .option('--json', 'print one JSON object')
    .action(async (keyId: string, options: { expiresIn: number; json?: boolean }) => {
      const rolled = await withDb(config(), async (db) => {
        const old = await findKey(db.kysely, keyId);
        if (!old) throw new CliError(`no key ${keyId}`);
        if (old.revoked_at !== null) throw new CliError(`key ${keyId} is revoked`);
        if (old.expires_at !== null && old.expires_at <= Date.now()) throw new CliError(`key ${keyId} has expired`);
        return { old, ...(await withinCap(() => rollKey(db.kysely, old, options.expiresIn))) };
      });
      const view = {
        id: rolled.row.id,
        env: rolled.row.env,
        secret: rolled.secret,
        replaces: rolled.old.id,
        old_key_expires_at: iso(rolled.oldExpiresAt),
      };
      if (options.json) json(view);
      else out(`${view.id}  ${view.secret}  (shown once); ${view.replaces} keeps working until ${view.old_key_expires_at}`);
    });
  keys
    .command('revoke <key_id>')
    .description('revoke a key at once')
    .option('--json', 'print one JSON object')
    .action(async (keyId: string, options: { json?: boolean }) => {
      await withDb(config(), async (db) => {
        const key = await findKey(db.kysely, keyId);
        if (!key) throw new CliError(`no key ${keyId}`);
        if (key.revoked_at !== null) throw new CliError(`key ${keyId} is already revoked`);
        await revokeKey(db.kysely, keyId);
      });
      if (options.json) json({ id: keyId, revoked: true });
      else out(`revoked ${keyId}`);
    });
}

/** `--sender` given once per sender; a value that is no sender id is refused before anything is written. */
function collectSender(value: string, previous: string[]): string[] {
  if (!KEY_SENDER_PATTERN.test(value)) throw new InvalidArgumentError('not a sender id (snd_…, ws_… or ts_…)');
  return [...previous, value];
}

/** Over the cap on active keys: the CLI's one line on stderr (and a non-zero exit), not a stack trace. */
async function withinCap<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof LimitReachedError) throw new CliError(error.message);
    throw error;
  }
}
