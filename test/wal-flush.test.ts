import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { WalFlusher, type OpenFile } from '../src/store/sqlite-durable.js';

/**
 * The disk flush behind every SQLite write's promise (no 202 before the commit is on disk). The disk
 * is a stand-in here, so that each flush can be held and let go in a chosen order: what is checked is
 * the promise each writer gets, which must not resolve before a flush that began after it asked.
 */
describe('flushing the SQLite write-ahead log', () => {
  /** A WAL "file" whose every datasync waits until the test lets it finish. */
  function heldDisk() {
    const syncs: Array<{ finish(): void }> = [];
    const openFile: OpenFile = async () => ({
      datasync: () => new Promise<void>((resolve) => syncs.push({ finish: resolve })),
      sync: async () => undefined,
      close: async () => undefined,
    });
    return { syncs, flusher: new WalFlusher('/nowhere/voicenote.db', openFile) };
  }

  /** Lets promise callbacks run (not a turn of the event loop: no timer, no setImmediate). */
  async function settle(): Promise<void> {
    for (let i = 0; i < 20; i++) await Promise.resolve();
  }

  /** Whether a promise has resolved by now. */
  async function isDone(promise: Promise<void>): Promise<boolean> {
    let done = false;
    void promise.then(() => (done = true));
    await settle();
    return done;
  }

  it('starts at once, without waiting for the next turn of the event loop', async () => {
    const { syncs, flusher } = heldDisk();
    const first = flusher.flush();
    await settle();
    assert.equal(syncs.length, 1, 'the flush is on its way before any timer or immediate runs');
    syncs[0]!.finish();
    assert.equal(await isDone(first), true);
  });

  it('a write that asks while a flush runs gets a flush of its own that starts after it asked, and is not done when the earlier one is', async () => {
    const { syncs, flusher } = heldDisk();
    const first = flusher.flush();
    await settle();
    const second = flusher.flush();
    await settle();
    assert.notEqual(second, first);
    assert.equal(syncs.length, 2, 'a second flush runs beside the first');
    syncs[0]!.finish();
    assert.equal(await isDone(first), true);
    assert.equal(await isDone(second), false, 'the first flush may have begun before the second write');
    syncs[1]!.finish();
    assert.equal(await isDone(second), true);
  });

  it('with two flushes running, the writes that ask share the next one, which starts when one of them ends; a write after that start waits for another', async () => {
    const { syncs, flusher } = heldDisk();
    const running = [flusher.flush(), flusher.flush()];
    await settle();
    const third = flusher.flush();
    const fourth = flusher.flush();
    assert.equal(fourth, third, 'writes waiting for a free slot share one flush');
    await settle();
    assert.equal(syncs.length, 2, 'no third flush while two run');
    syncs[0]!.finish();
    await settle();
    assert.equal(syncs.length, 3, 'the shared flush starts once a slot is free');
    assert.equal(await isDone(running[0]!), true);
    const fifth = flusher.flush();
    assert.notEqual(fifth, third, 'the shared flush has started: a later write cannot join it');
    syncs[2]!.finish();
    assert.equal(await isDone(third), true);
    assert.equal(await isDone(fifth), false);
    await settle();
    assert.equal(syncs.length, 4, 'the later write gets the slot the shared flush let go');
    syncs[3]!.finish();
    syncs[1]!.finish();
    assert.equal(await isDone(fifth), true);
    assert.equal(await isDone(running[1]!), true);
  });
});
