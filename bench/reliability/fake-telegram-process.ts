/**
 * The fake Bot API of test/fakes/telegram-api.ts in a process of its own, for the reliability
 * scripts: started with fork(), it says `{type: 'ready', apiRoot}` and answers `{type: 'stats'}` with
 * what it received. Optional faults (argv[2], JSON): shares of calls answered 5xx, 429 with
 * retry_after, or never answered.
 */
import { startTelegramApi } from '../../test/fakes/telegram-api.js';

export interface FakeFaults {
  serverError?: number;
  rateLimited?: number;
  retryAfterSeconds?: number;
  hang?: number;
}

/** One call as the scripts see it: chat, time, what it was answered (0 = never answered). */
export interface CallRecord {
  token: string;
  chatId: string;
  at: number;
  status: number;
  retryAfter?: number;
}

export interface FakeStats {
  calls: CallRecord[];
}

const faults = JSON.parse(process.argv[2] ?? '{}') as FakeFaults;
const fake = await startTelegramApi();
// Every message of a run has a bot token of its own, so a token's calls are one message's attempts, in order.
const arrivals = new Map<string, number[]>();
fake.beforeReadingBody = async (token) => {
  arrivals.set(token, [...(arrivals.get(token) ?? []), Date.now()]);
  const r = Math.random();
  const serverError = faults.serverError ?? 0;
  const rateLimited = faults.rateLimited ?? 0;
  const hang = faults.hang ?? 0;
  if (r < serverError) fake.failForToken(token, { kind: 'server_error', status: 500 + Math.floor(Math.random() * 4) }, 1);
  else if (r < serverError + rateLimited) fake.failForToken(token, { kind: 'rate_limited', retryAfter: faults.retryAfterSeconds ?? 3 }, 1);
  else if (r < serverError + rateLimited + hang) fake.failForToken(token, { kind: 'stall' }, 1);
};

process.on('message', (msg: { type: string }) => {
  if (msg.type === 'stats') {
    const seen = new Map<string, number>();
    const calls: CallRecord[] = fake.calls.map((c) => {
      const i = seen.get(c.token) ?? 0;
      seen.set(c.token, i + 1);
      let retryAfter: number | undefined;
      if (c.reply.status === 429) {
        try {
          retryAfter = (JSON.parse(c.reply.body) as { parameters?: { retry_after?: number } }).parameters?.retry_after;
        } catch {
          // not JSON
        }
      }
      return { token: c.token, chatId: c.chatId ?? '', at: arrivals.get(c.token)?.[i] ?? 0, status: c.reply.status, ...(retryAfter !== undefined ? { retryAfter } : {}) };
    });
    process.send!({ type: 'stats', stats: { calls } satisfies FakeStats });
  }
  if (msg.type === 'close') void fake.close().then(() => process.exit(0));
});
process.send!({ type: 'ready', apiRoot: fake.apiRoot });
