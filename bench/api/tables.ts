/** The API bench's sections of BENCHMARKS.md, as markdown. */
import { availableParallelism } from 'node:os';
import { READ_REQUESTS_PER_MINUTE } from '../../src/core/plans.js';
import { commandLine, machineDescription } from '../report.js';
import { BOTS, CHATS, CONNECTIONS, MESSAGES, RSS_SAMPLE_MS, SECONDS, WARMUP_SECONDS } from './settings.js';
import type { StorageResult } from './types.js';

export const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
export const mib = (bytes: number): string => (bytes > 0 ? `${fmt(bytes / 1024 ** 2, 0)} MiB` : '–');

export function memoryTable(lines: string[], results: StorageResult[], title: string, description: string): void {
  lines.push(`### Memory (${title})`, '');
  lines.push(description, '');
  lines.push('| storage | start | max | peak |');
  lines.push('|---|---|---|---|');
  for (const r of results) lines.push(`| ${r.storage} | ${mib(r.rss.start)} | ${mib(r.rss.max)} | ${mib(r.rss.peak)} |`);
}

export function header(lines: string[], title: string, notes: string[], startedAt: Date): void {
  lines.push(title, '');
  lines.push(`Measured ${startedAt.toISOString()} with \`${commandLine('node --import tsx bench/api.ts')}\` (source: \`bench/api.ts\`).`, '');
  lines.push(machineDescription(), '');
  lines.push(
    `Each storage runs in a server process of its own: the app built with \`createApp\` (logging silent), ` +
      `load shedding off (\`MAX_EVENT_LOOP_DELAY_MS=0\`), one enterprise account with rate limit and quota set to 10,000,000.`,
    '',
  );
  for (const note of notes) lines.push(`> ${note}`, '');
}

export function httpReport(results: StorageResult[], notes: string[], startedAt: Date): string {
  const lines: string[] = [];
  header(lines, '## HTTP API', notes, startedAt);
  lines.push(
    `The app listens on 127.0.0.1 with its worker off. Load comes from autocannon in a separate process: ` +
      `${CONNECTIONS} connections, ${SECONDS} s per endpoint after ${WARMUP_SECONDS} s of warm-up, endpoints one after another, ` +
      `each real endpoint right after its bare twin. "% of bare" is the endpoint's req/s over its bare twin's in the same run: ` +
      `a route in the same Fastify server that takes the same JSON through the same schema and answers the same JSON, ` +
      `with no key, no limits and no storage. "Server CPU per request" is the server process's CPU time over the run ` +
      `(every thread: the event loop, libuv's pool that flushes the WAL, SQLite's checkpoint thread) divided by the requests answered; ` +
      `the load generator shares the same two cores, so a route's req/s follows its CPU per request.`,
    '',
  );
  lines.push('| storage | endpoint | measures | req/s (mean) | % of bare | p50 | p99 | server CPU per request | requests | non-2xx | errors |');
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    r.endpoints.forEach((e, i) => {
      const l = e.load;
      const base = r.endpoints[e.baseline]!.load.rps;
      const ratio = e.baseline === i ? 'baseline' : `${fmt((l.rps / base) * 100, 1)} %`;
      lines.push(
        `| ${r.storage} | \`${e.label}\` | ${e.what} | ${fmt(l.rps)} | ${ratio} | ${l.p50} ms | ${l.p99} ms | ${fmt(e.cpuUsPerRequest)} µs | ${fmt(l.total)} | ${fmt(l.non2xx)} | ${fmt(l.errors + l.timeouts)} |`,
      );
    });
  }
  for (const r of results) {
    for (const e of r.endpoints) {
      const bad = e.load.non2xx + e.load.errors + e.load.timeouts;
      if (bad > 0) lines.push('', `> Warning: ${r.storage} \`${e.label}\` had ${fmt(bad)} non-2xx answers or errors; its numbers do not measure the success path alone.`);
    }
  }
  lines.push('');
  lines.push(
    `\`GET /status\` reads one message, rotating over ${results.map((r) => `${r.readKeys} keys (${r.storage})`).join(', ')} of the account: ` +
      `the read bucket is ${READ_REQUESTS_PER_MINUTE} requests per key per minute whatever the plan, so one key would measure 429s. ` +
      `\`POST /send\` is a valid Telegram sandbox body with no Idempotency-Key; the queue grows during the run ` +
      `(${results.map((r) => `${fmt(r.rowsAfterSendLoad)} rows (${r.storage})`).join(', ')} at the end, warm-up included).` +
      results
        .filter((r) => r.walBytesAfterSendLoad !== undefined)
        .map((r) => ` SQLite's write-ahead log file after the send load: ${(r.walBytesAfterSendLoad! / 1024 / 1024).toFixed(1)} MiB.`)
        .join(''),
    '',
  );
  memoryTable(
    lines,
    results,
    'server process RSS, HTTP runs',
    'The HTTP server process runs the compiled service (dist/) under plain node, with nothing of the bench in it but the module that builds the app, ' +
      'adds the bare twins and creates the account and keys (`bench/http-server.mjs`): no tsx, no audio server, no load generator. ' +
      `From \`/proc\`: "start" once it listens with the account and keys made, "max" the largest of samples taken every ${RSS_SAMPLE_MS} ms during the measured phase, ` +
      `"peak" its VmHWM (set-up included).`,
  );
  return lines.join('\n') + '\n';
}

export function deliveryReport(results: StorageResult[], notes: string[], startedAt: Date): string {
  const lines: string[] = [];
  header(lines, '## Delivery (one worker, fake Telegram Bot API, audio cached)', notes, startedAt);
  lines.push(
    `${fmt(MESSAGES)} live Telegram sends to ${fmt(CHATS)} chats through ${fmt(BOTS)} bots are queued (\`POST /send\` in the bench's server process, its worker off); ` +
      `then the service's own worker process starts (\`node bin/voicenote.js worker\`, the compiled dist/, \`LOG_LEVEL=warn\`) on the same storage, ` +
      `and the clock runs from its first claim (its start-up is the "start-up" column) until every message is delivered or failed (the database polled every 20 ms). ` +
      `Message i goes to chat i mod ${fmt(CHATS)} through a bot that moves on by one each time the chats come round again, so no chat hears twice from one bot ` +
      `and the service's pacing (about 28 sends a second per bot, one a second per bot and chat) allows up to about ${fmt(BOTS * 28)} messages a second: ` +
      `the run measures the worker, not the pace of one bot. ` +
      `The Bot API is the strict fake of the suite (\`test/fakes/telegram-api.ts\`) in a process of its own, with Telegram's flood limits enforced ` +
      `(429 to a send less than 900 ms after the last one to the same chat from the same bot, or beyond 30 a second from one bot): ` +
      `"429s" counts the sends that came faster than Telegram allows. Every delivery is a real multipart \`sendVoice\` upload over loopback. ` +
      `The audio is an OGG Opus mono file on a loopback HTTP server whose conversion is already in the audio cache before the clock starts. ` +
      `"CPU" is each process's CPU time over the run's wall time (the machine has ${availableParallelism()} cores).`,
    '',
  );
  lines.push('| storage | worker concurrency | messages | delivered | failed | sendVoice calls answered | 429s | start-up | time | messages/s | CPU: worker / fake Bot API |');
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const d = r.delivery!;
    lines.push(
      `| ${r.storage} | ${d.concurrency} | ${fmt(d.messages)} | ${fmt(d.delivered)} | ${fmt(d.failed)} | ${fmt(d.telegramCalls)} | ${fmt(d.floodRefusals)} | ${fmt(d.startupMs / 1000, 2)} s | ${fmt(d.ms / 1000, 2)} s | ${fmt((d.messages / d.ms) * 1000, 0)} | ${fmt(d.serverCpu, 2)} / ${fmt(d.fakeCpu, 2)} cores |`,
    );
  }
  for (const r of results) if (r.delivery!.firstError) lines.push('', `${r.storage}: first failure: \`${r.delivery!.firstError}\``);
  lines.push('');
  memoryTable(
    lines,
    results,
    'worker process RSS',
    'The worker process alone (`voicenote worker`, nothing else in it), from `/proc`: "start" at its first claim, ' +
      `"max" the largest of samples taken every ${RSS_SAMPLE_MS} ms until every message is settled, "peak" its VmHWM (start-up included).`,
  );
  return lines.join('\n') + '\n';
}
