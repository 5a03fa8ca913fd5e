/**
 * The fake Bot API (test/fakes/telegram-api.ts) in a process of its own for the delivery benchmarks,
 * so that its multipart parsing neither shares the worker's event loop nor counts in its RSS. Started
 * with fork(); sends `{ apiRoot }` over IPC once listening. The fake keeps every call (voice bytes
 * included) for tests to inspect; here the record is emptied every second so a long run stays small.
 * With `--flood-limits` it answers 429 as Telegram's flood control does (per bot and per chat), so a
 * run shows whether the service's pacing held.
 */
import { startTelegramApi } from '../test/fakes/telegram-api.js';

const fake = await startTelegramApi();
if (process.argv.includes('--flood-limits')) fake.enforceFloodLimits();
let answered = 0;
const trim = setInterval(() => {
  answered += fake.calls.length;
  fake.calls.length = 0;
}, 1_000);
process.send!({ apiRoot: fake.apiRoot });
process.on('message', (m) => {
  if (m === 'count') {
    const cpu = process.cpuUsage();
    process.send!({ answered: answered + fake.calls.length, floodRefusals: fake.floodRefusals, cpuMicros: cpu.user + cpu.system });
  }
});
process.on('disconnect', () => {
  clearInterval(trim);
  void fake.close().then(() => process.exit(0));
});
