/** The settings of `npm run bench` (bench/api.ts), read once from the environment, and the files it starts. */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { intEnv } from '../env.js';

export type Storage = 'sqlite' | 'postgres';

export const SECONDS = intEnv('BENCH_SECONDS', 10, 1);
export const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 20, 1);
export const WARMUP_SECONDS = intEnv('BENCH_WARMUP_SECONDS', 1, 0);
export const MESSAGES = intEnv('BENCH_MESSAGES', 3000, 1);
export const CHATS = intEnv('BENCH_CHATS', 1000, 1);
// 100 bots at Telegram's ~28 sends a second each (one per 35 ms) leave room for ~2,800 messages a second.
export const BOTS = intEnv('BENCH_BOTS', 100, 1);
export const WORKER_CONCURRENCY = process.env.BENCH_WORKER_CONCURRENCY?.trim() ? intEnv('BENCH_WORKER_CONCURRENCY', 8, 1) : undefined;
export const ONLY = process.env.BENCH_ONLY?.trim() || undefined;
if (ONLY !== undefined && ONLY !== 'http' && ONLY !== 'delivery') throw new Error(`BENCH_ONLY must be http or delivery, got "${ONLY}"`);
export const DEFAULT_PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
/** GET /status shares the fixed per-key read bucket; enough keys that this many req/s never exhausts it. */
export const READ_RPS_CEILING = 60_000;
export const SEND_INTAKE_CONCURRENCY = 20;
export const TELEGRAM_TOKEN = '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';
/** A well-formed token of its own for each bench bot (the fake accepts any well-formed token). */
export const botToken = (bot: number): string => `${7_000_000_000 + bot}:${createHash('sha256').update(`bench bot ${bot}`).digest('base64url').slice(0, 35)}`;
/**
 * Message i goes to chat i mod CHATS through a bot that moves on by one every time the chats come round
 * again: a chat hears from several bots, never twice from one (while BOTS > MESSAGES / CHATS), so the
 * per-chat pace (one a second per bot and chat) never makes a message wait and the per-bot pace bounds
 * the run at BOTS × ~28 messages a second.
 */
export const recipientOf = (i: number): { chat: string; token: string } => ({
  chat: String(100_000_000 + (i % CHATS)),
  token: botToken((i + Math.floor(i / CHATS)) % BOTS),
});
export const RSS_SAMPLE_MS = 250;

export const HTTP_SERVER = fileURLToPath(new URL('../http-server.mjs', import.meta.url));
export const VOICENOTE_BIN = fileURLToPath(new URL('../../bin/voicenote.js', import.meta.url));
/** Linux's USER_HZ: /proc reports CPU time in these ticks. */
export const CLOCK_TICKS = 100;
export const LOADGEN = fileURLToPath(new URL('../loadgen.ts', import.meta.url));
export const TELEGRAM_PROCESS = fileURLToPath(new URL('../telegram-process.ts', import.meta.url));
