import type { Kysely } from 'kysely';
import type { Api as TL } from 'telegram';
import type { Logger } from 'pino';
import type { Database } from '../../../store/schema.js';
import { findUpdateState, saveUpdateState, type UpdateState } from '../../../store/telegram-account-state.js';
import { loadTelegram, rpcErrorName, type TelegramAccountClient } from './client.js';

/**
 * One linked account's updates in order, with nothing lost across a gap, as Telegram asks of clients
 * (core.telegram.org/api/updates, "Recovering gaps"); GramJS does none of it (`catchUp()` is a TODO in
 * `client/updates.js`). The account's state (pts, qts, date, seq) is kept with its session; an update
 * whose pts follows the kept one is handed on, one already seen is dropped, and one beyond a gap makes
 * the feed ask updates.getDifference from the kept state first (paging through its slices), handing on
 * what that returns as if it had been pushed. The same is asked when the connection comes back after a
 * drop, when a process takes the session over, and after a long silence.
 */
export interface UpdateFeed {
  /** An update pushed on the connection, or the updates a call answered with (which Telegram does not push). */
  receive(update: unknown): void;
  /** Asks Telegram what was missed since the kept state (the first time: the state to keep from now on). */
  catchUp(why: string): Promise<void>;
  /** When an update was last heard or the difference last asked (the feed's clock). */
  readonly lastHeardAt: number;
}

/** Pages of one catch-up at most: a slice is 1,000 or so updates, so this is far more than a day's silence. */
const MAX_PAGES = 100;

export function createUpdateFeed(deps: {
  db: Kysely<Database>;
  holderId: string;
  sessionId: string;
  client: TelegramAccountClient;
  logger: Logger;
  now: () => number;
  /** Where each single update goes (receipts, replies). */
  deliver: (update: unknown) => void;
  /** A call of the feed's was refused (e.g. the authorization is gone). */
  onRefused?: (error: unknown) => void;
}): UpdateFeed {
  const { db, client, sessionId } = deps;
  let state: UpdateState | undefined;
  let loaded = false;
  let lastHeardAt = deps.now();
  // Every change of the state runs in this one chain: updates and catch-ups never interleave.
  let chain: Promise<void> = Promise.resolve();
  // The caller's promise rejects with a failure (a takeover must know the key is dead); the chain goes on.
  const run = (work: () => Promise<void>): Promise<void> => {
    const next = chain.then(work);
    chain = next.catch((err: unknown) => {
      deps.logger.warn({ session_id: sessionId, error: rpcErrorName(err) ?? String(err) }, 'could not follow the Telegram account’s updates; tried again on the next update or catch-up');
      deps.onRefused?.(err);
    });
    return next;
  };

  async function keep(): Promise<void> {
    if (state) await saveUpdateState(db, sessionId, deps.holderId, state, deps.now());
  }

  /** Reads the kept state the first time; true when there is one. */
  async function loadKept(): Promise<boolean> {
    if (!loaded) {
      state = await findUpdateState(db, sessionId);
      loaded = true;
    }
    return state !== undefined;
  }

  async function difference(): Promise<void> {
    const { Api } = await loadTelegram();
    await loadKept();
    if (!state) {
      // Nothing kept yet (a fresh link): Telegram's state now is where listening starts.
      const now = await client.invoke(new Api.updates.GetState());
      state = { pts: now.pts, qts: now.qts, date: now.date, seq: now.seq };
      return keep();
    }
    for (let page = 0; page < MAX_PAGES; page++) {
      const diff: TL.updates.TypeDifference = await client.invoke(new Api.updates.GetDifference({ pts: state.pts, date: state.date, qts: state.qts }));
      if (diff instanceof Api.updates.DifferenceEmpty) {
        state = { ...state, date: diff.date, seq: diff.seq };
        return keep();
      }
      if (diff instanceof Api.updates.DifferenceTooLong) {
        // Too much was missed for one answer: Telegram gives the pts to go on from (what lies before it is not sent).
        deps.logger.warn({ session_id: sessionId, from_pts: state.pts, to_pts: diff.pts }, 'Telegram says too much was missed to send it all; going on from its pts');
        state = { ...state, pts: diff.pts };
        await keep();
        continue;
      }
      for (const message of diff.newMessages) deps.deliver(new Api.UpdateNewMessage({ message, pts: 0, ptsCount: 0 }));
      for (const update of diff.otherUpdates) deps.deliver(update);
      const next: TL.updates.State = diff instanceof Api.updates.DifferenceSlice ? diff.intermediateState : (diff as TL.updates.Difference).state;
      state = { pts: next.pts, qts: next.qts, date: next.date, seq: next.seq };
      await keep();
      if (diff instanceof Api.updates.Difference) return;
    }
  }

  /** One single update: handed on in pts order (a gap is fetched first); those without pts go straight on. */
  async function apply(update: unknown): Promise<void> {
    const u = update as { pts?: unknown; ptsCount?: unknown; date?: unknown; message?: { date?: unknown } };
    if (typeof u.pts !== 'number' || typeof u.ptsCount !== 'number' || u.ptsCount === 0) return deps.deliver(update);
    if (!loaded || !state) {
      const hadState = await loadKept();
      await difference();
      // A state taken just now (nothing was kept) already counts this update: hand it on all the same.
      if (!hadState) return deps.deliver(update);
    }
    if (!state) return;
    if (u.pts <= state.pts) return; // already handed on (by a difference, or pushed twice)
    if (state.pts + u.ptsCount < u.pts) {
      // A gap: what lies in it comes with the difference, this update too.
      await difference();
      return;
    }
    deps.deliver(update);
    const date = typeof u.date === 'number' ? u.date : typeof u.message?.date === 'number' ? u.message.date : state.date;
    state = { ...state, pts: u.pts, date: Math.max(state.date, date) };
    await keep();
  }

  /** The single updates of what arrived, as GramJS splits containers before its handlers (client/updates.js, _handleUpdate). */
  function singles(update: unknown): unknown[] {
    const u = update as { className?: string; update?: unknown; updates?: unknown[] };
    if (u.className === 'UpdatesTooLong') return [];
    if (u.className === 'UpdateShort') return [u.update];
    if ((u.className === 'Updates' || u.className === 'UpdatesCombined') && Array.isArray(u.updates)) return u.updates;
    return [update];
  }

  return {
    receive(update) {
      lastHeardAt = deps.now();
      if ((update as { className?: string }).className === 'UpdatesTooLong') {
        void run(difference).catch(() => undefined);
        return;
      }
      for (const one of singles(update)) void run(() => apply(one)).catch(() => undefined);
    },
    catchUp(why) {
      lastHeardAt = deps.now();
      deps.logger.debug({ session_id: sessionId, why }, 'asking Telegram for the updates missed');
      return run(difference);
    },
    get lastHeardAt() {
      return lastHeardAt;
    },
  };
}
