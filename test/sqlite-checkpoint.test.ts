import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { sql } from 'kysely';
import { openDb, SQLITE_CACHE_SIZE, SQLITE_FILE } from '../src/store/db.js';
import { RESTART_AFTER_FRAMES } from '../src/store/sqlite-checkpointer.js';
import { closeSharedAudio, defaultSendBody, startTestApp, TEST_DATABASE_URL } from './fixtures/app-harness.js';

/**
 * SQLite keeps commits in its write-ahead log until a checkpoint copies them into the database file.
 * The service does that on a thread of its own, not in the commit that happens to pass the threshold
 * on the event loop. What an operator can see: the log's frames are copied back while the service
 * runs, without any request paying for it.
 */
describe('SQLite write-ahead log copied back in the background', { skip: TEST_DATABASE_URL !== undefined && 'SQLite only' }, () => {
  after(closeSharedAudio);

  /** The WAL index (the -shm file): frames in the log, and how many of them are in the database file. */
  function walIndex(dataDir: string): { frames: number; copied: number } {
    const shm = readFileSync(join(dataDir, `${SQLITE_FILE}-shm`));
    // WalIndexHdr.mxFrame at byte 16, WalCkptInfo.nBackfill at byte 96 (native byte order).
    return { frames: shm.readUInt32LE(16), copied: shm.readUInt32LE(96) };
  }

  it('frames committed by accepted sends reach the database file within a second, with no request in between', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount({ quota: 1_000 });
      for (let i = 0; i < 20; i++) {
        const res = await t.send(a.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: String(500_000 + i) });
        assert.equal(res.statusCode, 202, res.body);
      }
      const written = walIndex(t.dataDir);
      assert.ok(written.frames > 0, 'the sends were committed to the log');
      let index = written;
      for (let waited = 0; waited < 2_000 && index.copied < written.frames; waited += 50) {
        await sleep(50);
        index = walIndex(t.dataDir);
      }
      assert.ok(index.copied >= written.frames, `copied ${index.copied} of ${written.frames} frames`);
    } finally {
      await t.close();
    }
  });

  it('under a steady stream of sends the log starts again from its beginning instead of growing for as long as the stream lasts', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount({ quota: 1_000_000, rateLimit: 1_000_000 });
      const body = defaultSendBody('telegram', t.voiceUrl);
      let streaming = true;
      // 16 callers, each sending again as soon as its 202 comes back: a commit lands every few milliseconds.
      const callers = Array.from({ length: 16 }, async (_, caller) => {
        for (let i = 0; streaming; i++) {
          const res = await t.send(a.testKey, { ...body, recipient: String(600_000 + caller * 100_000 + i) });
          assert.equal(res.statusCode, 202, res.body);
        }
      });
      // Frames committed in all, counted from the log's length: a restart shows as a length that drops.
      let committed = 0;
      let last = 0;
      let restarts = 0;
      let longest = 0;
      const started = Date.now();
      try {
        while (Date.now() - started < 60_000 && committed < 4 * RESTART_AFTER_FRAMES) {
          await sleep(10);
          const { frames } = walIndex(t.dataDir);
          if (frames < last) restarts++;
          committed += frames >= last ? frames - last : frames;
          last = frames;
          longest = Math.max(longest, frames);
        }
      } finally {
        streaming = false;
        await Promise.all(callers);
      }
      assert.ok(committed >= 4 * RESTART_AFTER_FRAMES, `the stream committed only ${committed} frames in 60 s`);
      assert.ok(restarts > 0, `the log never started again: ${committed} frames committed, its length only grew (to ${longest})`);
      assert.ok(longest < committed / 2, `the log reached ${longest} frames of ${committed} committed`);
    } finally {
      await t.close();
    }
  });
});

describe('SQLite page cache', { skip: TEST_DATABASE_URL !== undefined && 'SQLite only' }, () => {
  it("is SQLite's own 2 MB, not better-sqlite3's 16 MB, which filled as the database grew (RSS still rising at the end of a 10-minute soak)", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicenote-cache-size-'));
    const db = await openDb({ databaseUrl: undefined, dataDir });
    try {
      const rows = await sql<{ cache_size: number }>`pragma cache_size`.execute(db.kysely);
      assert.equal(SQLITE_CACHE_SIZE, -2000);
      assert.equal(Number(rows.rows[0]?.cache_size), SQLITE_CACHE_SIZE);
    } finally {
      await db.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
