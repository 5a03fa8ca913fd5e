import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { SecretBox } from '../../core/secret-box.js';
import type { Database } from '../../store/schema.js';
import { readSealedKeys, saveSealedCreds, writeSealedKeys, type SealedKeyWrite } from '../../store/whatsapp-live.js';
import { loadBaileys, type AuthCreds, type AuthState, type KeyData } from './socket.js';

/**
 * A live session's auth state backed by the database: creds and signal keys serialised with Baileys'
 * `BufferJSON`, sealed with the SecretBox, written in order on every change. Losing a key update breaks
 * delivery, so keys are written before `keys.set` resolves; creds are written on every `creds.update`.
 */
export interface StoredAuthState extends AuthState {
  /** Queues a write of the creds as they are now. */
  saveCreds(): Promise<void>;
  /** Resolves once every write queued so far is done. */
  flush(): Promise<void>;
  /** Stops writing: the session is closing, being erased or held by another process now. */
  stopWriting(): void;
}

export async function newAuthCreds(): Promise<AuthCreds> {
  const { initAuthCreds } = await loadBaileys();
  return initAuthCreds() as unknown as AuthCreds;
}

export async function sealAuthValue(box: SecretBox, value: unknown): Promise<string> {
  const { BufferJSON } = await loadBaileys();
  return box.seal(JSON.stringify(value, BufferJSON.replacer));
}

export async function openAuthValue<T>(box: SecretBox, sealed: string): Promise<T> {
  const { BufferJSON } = await loadBaileys();
  return JSON.parse(box.open(sealed), BufferJSON.reviver) as T;
}

export interface AuthStateDeps {
  db: Kysely<Database>;
  box: SecretBox;
  logger: Logger;
  sessionId: string;
  /** The lease holder this process writes as. */
  holder: string;
  creds: AuthCreds;
  /** A write found that this process no longer holds the session. */
  onLeaseLost(): void;
}

export function createStoredAuthState(deps: AuthStateDeps): StoredAuthState {
  const { db, box, logger, sessionId, holder } = deps;
  let queue: Promise<unknown> = Promise.resolve();
  let writing = true;

  function enqueue(task: () => Promise<boolean>): Promise<void> {
    const run = queue.then(async () => {
      if (!writing) return;
      const held = await task();
      if (!held) {
        writing = false;
        deps.onLeaseLost();
      }
    });
    queue = run.catch(() => undefined);
    return run;
  }

  const keys = {
    async get(type: string, ids: string[]): Promise<Record<string, unknown>> {
      const { proto } = await loadBaileys();
      const sealed = await readSealedKeys(db, sessionId, type, ids);
      const out: Record<string, unknown> = {};
      for (const [id, value] of sealed) {
        let opened = await openAuthValue<unknown>(box, value);
        // Protobuf messages come back as plain objects; Baileys expects the message type for these.
        if (type === 'app-state-sync-key' && opened) opened = proto.Message.AppStateSyncKeyData.fromObject(opened as Record<string, unknown>);
        out[id] = opened;
      }
      return out;
    },
    async set(data: KeyData): Promise<void> {
      const writes: SealedKeyWrite[] = [];
      for (const [type, values] of Object.entries(data)) {
        for (const [keyId, value] of Object.entries(values ?? {})) {
          writes.push({ type, keyId, value: value === null || value === undefined ? null : await sealAuthValue(box, value) });
        }
      }
      await enqueue(() => writeSealedKeys(db, sessionId, holder, writes));
    },
  };

  const state: StoredAuthState = {
    creds: deps.creds,
    keys,
    saveCreds() {
      // Sealed when the write runs, so a burst of updates writes the latest creds each time, in order.
      const run = enqueue(async () => saveSealedCreds(db, sessionId, holder, await sealAuthValue(box, state.creds)));
      run.catch((err: unknown) => logger.error({ err, session_id: sessionId }, 'could not save WhatsApp creds'));
      return run;
    },
    async flush() {
      await queue;
    },
    stopWriting() {
      writing = false;
    },
  };
  return state;
}
