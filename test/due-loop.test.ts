import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { DueLoop, untilNextDue, type NextTurn } from '../src/delivery/due-loop.js';

/**
 * The loop the delivery worker and the webhook sender share. The waits here are long on purpose (a
 * minute): a loop that does not do what is asserted hangs until the test's own timeout and fails.
 */

const MINUTE = 60_000;

/** A loop whose turns answer from `script` (the last answer repeats), with each turn's start announced. */
function scripted(script: Array<NextTurn | Error>, pollMs = MINUTE) {
  const turns: Array<{ woken: boolean }> = [];
  const waiters: Array<{ count: number; resolve(): void }> = [];
  const loop = new DueLoop({
    pollMs,
    onError: () => undefined,
    async turn(context) {
      turns.push(context);
      for (const w of waiters.filter((w) => turns.length >= w.count)) w.resolve();
      const answer = script[Math.min(turns.length - 1, script.length - 1)]!;
      if (answer instanceof Error) throw answer;
      return answer;
    },
  });
  const turnsReach = (count: number) =>
    new Promise<void>((resolve) => {
      if (turns.length >= count) resolve();
      else waiters.push({ count, resolve });
    });
  return { loop, turns, turnsReach };
}

describe('the due-loop', () => {
  it('wakes on notice: a sleep of a minute ends when work is announced', { timeout: 10_000 }, async () => {
    const { loop, turns, turnsReach } = scripted([{ next: 'sleep', ms: MINUTE }]);
    loop.start();
    await turnsReach(1);
    loop.nudge();
    await turnsReach(2);
    assert.equal(turns[1]!.woken, true, 'the turn knows a notice ended the sleep');
    await loop.stop(0);
  });

  it('a finished piece of work is a notice: its slot is free, the loop looks again', { timeout: 10_000 }, async () => {
    const { loop, turnsReach } = scripted([{ next: 'sleep', ms: MINUTE }]);
    loop.start();
    await turnsReach(1);
    let finish!: () => void;
    loop.track('work-1', new Promise<void>((resolve) => (finish = resolve)));
    assert.equal(loop.inFlight.size, 1);
    finish();
    await turnsReach(2);
    assert.equal(loop.inFlight.size, 0);
    await loop.stop(0);
  });

  it('sleeps until the next due time: the next turn comes by itself, with no notice', { timeout: 10_000 }, async () => {
    const { loop, turns, turnsReach } = scripted([{ next: 'sleep', ms: 20 }]);
    loop.start();
    await turnsReach(3);
    assert.equal(turns[1]!.woken, false, 'the sleep ended at its time');
    await loop.stop(0);
    // The time to sleep: the next due item's wait, within the poll and never a busy 0.
    assert.equal(await untilNextDue(async () => 30, MINUTE), 30);
    assert.equal(await untilNextDue(async () => 2 * MINUTE, MINUTE), MINUTE);
    assert.equal(await untilNextDue(async () => -100, MINUTE), 5);
    assert.equal(await untilNextDue(async () => undefined, MINUTE), MINUTE, 'nothing due: the poll');
    assert.equal(await untilNextDue(async () => Promise.reject(new Error('storage away')), MINUTE), MINUTE, 'storage cannot say: the poll');
  });

  it('"again" after a full claim: the next turn at once, without sleeping', { timeout: 10_000 }, async () => {
    const { loop, turnsReach } = scripted([{ next: 'again' }, { next: 'again' }, { next: 'sleep', ms: MINUTE }]);
    loop.start();
    await turnsReach(3);
    await loop.stop(0);
  });

  it('backs off while storage is away: notices do not cut the pause short, its time does', { timeout: 10_000 }, async () => {
    const { loop, turns, turnsReach } = scripted([new Error('storage away'), { next: 'sleep', ms: MINUTE }], 300);
    loop.start();
    await turnsReach(1);
    // Notices during the pause: each would cost a turn (a claim against storage that is away) if they ended it.
    for (let i = 0; i < 20; i++) {
      loop.nudge();
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(turns.length, 1, 'no turn during the pause');
    await turnsReach(2);
    await loop.stop(0);
    assert.equal(turns.length, 2);
  });

  it('stops within the grace: work that ends in time is waited for, work that hangs is not', { timeout: 10_000 }, async () => {
    const { loop, turns, turnsReach } = scripted([{ next: 'sleep', ms: MINUTE }]);
    loop.start();
    await turnsReach(1);
    let finished = false;
    loop.track('quick', new Promise<void>((resolve) => setTimeout(() => ((finished = true), resolve()), 50)));
    await loop.stop(MINUTE);
    assert.equal(finished, true, 'the quick work was waited for');
    const hanging = scripted([{ next: 'sleep', ms: MINUTE }]);
    hanging.loop.start();
    await hanging.turnsReach(1);
    hanging.loop.track('hangs', new Promise<void>(() => undefined));
    // A grace of 100 ms against work that never ends: stop returns (else the test times out).
    await hanging.loop.stop(100);
    assert.equal(hanging.loop.inFlight.size, 1, 'the hanging work is left to its owner (abort, leases)');
    assert.equal(hanging.loop.running, false);
    const before = turns.length;
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(turns.length, before, 'no turn after stop');
  });
});
