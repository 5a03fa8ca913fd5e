import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { CsvError, parseCsv } from '../src/cli/csv.js';
import { formatProgress } from '../src/cli/progress.js';
import { readSendCsv, sendBody } from '../src/cli/send.js';

/* The parts of `voicenote send --csv` that need no service: reading the file, the row keys, the progress line. */

describe('CSV reading', () => {
  test('quoted fields with commas, quotes and line breaks; CRLF; a byte-order mark; blank lines skipped', () => {
    const text = '\ufeffa,b,c\r\n1,"two, too","say ""hi"""\r\n\r\n3,"multi\nline",\n';
    assert.deepEqual(parseCsv(text), [
      ['a', 'b', 'c'],
      ['1', 'two, too', 'say "hi"'],
      ['3', 'multi\nline', ''],
    ]);
  });

  test('a quote that is never closed, or one inside a bare field, is an error naming the line', () => {
    assert.throws(() => parseCsv('a,b\n1,"open\n'), (e: unknown) => e instanceof CsvError && /line 2/.test(e.message));
    assert.throws(() => parseCsv('a,b\n1,x"y\n'), (e: unknown) => e instanceof CsvError && /line 2/.test(e.message));
  });

  test('each row gets a key from its header, number and content: the same file gives the same keys, a changed row a new one', () => {
    const file = 'platform,recipient,audio_url,bot_token\ntelegram,1,https://a/x.ogg,1:t\ntelegram,1,https://a/x.ogg,1:t\ntelegram,2,https://a/x.ogg,1:t\n';
    const rows = readSendCsv(file);
    assert.deepEqual(rows.map((r) => r.row), [1, 2, 3]);
    assert.equal(new Set(rows.map((r) => r.idempotencyKey)).size, 3, 'two identical rows are two sends');
    for (const row of rows) assert.match(row.idempotencyKey, /^csv-[0-9a-f]{40}$/);
    assert.deepEqual(readSendCsv(file).map((r) => r.idempotencyKey), rows.map((r) => r.idempotencyKey), 'stable across runs');
    const edited = readSendCsv(file.replace('telegram,2,', 'telegram,3,'));
    assert.deepEqual(edited.slice(0, 2).map((r) => r.idempotencyKey), rows.slice(0, 2).map((r) => r.idempotencyKey));
    assert.notEqual(edited[2]!.idempotencyKey, rows[2]!.idempotencyKey);
  });

  test('the body of a row: session fields gathered, empty cells not given, a numeric duration a number', () => {
    const [row] = readSendCsv(
      'platform,recipient,audio_url,li_at,csrf_token,user_agent,cookies,caption,duration\nlinkedin,jane-smith-a1b2c3,https://a/x.m4a,AQE,ajax:1,Mozilla/5.0 (X11),"li_at=AQE; lang=v=2&lang=en-us",,12\n',
    );
    assert.deepEqual(sendBody(row!.fields), {
      platform: 'linkedin',
      recipient: 'jane-smith-a1b2c3',
      audio_url: 'https://a/x.m4a',
      session: { li_at: 'AQE', csrf_token: 'ajax:1', user_agent: 'Mozilla/5.0 (X11)', cookies: 'li_at=AQE; lang=v=2&lang=en-us' },
      duration: 12,
    });
  });
});

test('a send_at column schedules the row; an empty cell sends at once', () => {
  const [scheduled, atOnce] = readSendCsv('platform,recipient,audio_url,bot_token,send_at\ntelegram,1,https://a/x.ogg,1:t,2026-12-01T09:00:00Z\ntelegram,2,https://a/x.ogg,1:t,\n');
  assert.equal(sendBody(scheduled!.fields).send_at, '2026-12-01T09:00:00Z');
  assert.equal('send_at' in sendBody(atOnce!.fields), false);
});

test('a cancel_on_reply column: true / 1 / yes asks for it, empty / false / 0 / no leaves it out, anything else goes to the API as written', () => {
  const rows = readSendCsv(
    'platform,recipient,audio_url,bot_token,send_at,cancel_on_reply\n' +
      ['true', 'YES', '1', '', 'false', '0', 'no', 'maybe'].map((v, i) => `telegram,${i},https://a/x.ogg,1:t,2026-12-01T09:00:00Z,${v}`).join('\n') +
      '\n',
  );
  assert.deepEqual(
    rows.map((row) => sendBody(row.fields).cancel_on_reply),
    [true, true, true, undefined, undefined, undefined, undefined, 'maybe'],
  );
});

describe('progress line', () => {
  test('done, failed, remaining, rate and time left', () => {
    const line = formatProgress({ done: 38, failed: 2, total: 100 }, 4_000);
    assert.match(line, /^\[#{10}-{14}\] 40\/100 /);
    assert.match(line, /done 38 {2}failed 2 {2}remaining 60 {2}10\.0\/s {2}~6s left/);
    assert.match(formatProgress({ done: 0, failed: 0, total: 5 }, 0, 'waiting 30s (rate limited)'), /~\? left {2}waiting 30s \(rate limited\)$/);
  });
});

describe('counts in CLI sentences', () => {
  test('"1 account", "2 accounts", "0 accounts"', async () => {
    const { counted } = await import('../src/cli/plural.js');
    assert.equal(counted(1, 'account'), '1 account');
    assert.equal(counted(2, 'account'), '2 accounts');
    assert.equal(counted(0, 'message'), '0 messages');
  });

  test('the CSV summary names the replays of an earlier run, and agrees in number', async () => {
    const { csvSummary } = await import('../src/cli/send.js');
    const row = { row: 1, id: 'msg_x' };
    assert.equal(csvSummary({ accepted: 1, rejected: 0, replayed: 0, rows: [row] }), '1 accepted, 0 rejected, of 1 row');
    assert.equal(
      csvSummary({ accepted: 2, rejected: 0, replayed: 2, rows: [row, { ...row, row: 2 }] }),
      '2 accepted (2 already sent by an earlier run, not sent again), 0 rejected, of 2 rows',
    );
  });
});
