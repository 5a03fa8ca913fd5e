import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { ENCODE_SHARE_WHILE_DELIVERING, restAfterEncoding, shareEncodesWith } from '../src/audio/encode-share.js';

describe('in-process encodes beside deliveries', () => {
  it('run flat out with nothing else to do, and rest so as to take their share while notes with ready audio wait', () => {
    assert.equal(restAfterEncoding(4), 0);
    let delivering = true;
    const undo = shareEncodesWith(() => delivering);
    try {
      const rest = restAfterEncoding(4);
      // 4 ms of encoding, then a rest: encoding is ENCODE_SHARE_WHILE_DELIVERING of the time.
      assert.ok(Math.abs(4 / (4 + rest) - ENCODE_SHARE_WHILE_DELIVERING) < 1e-9, `rest ${rest} ms`);
      delivering = false;
      assert.equal(restAfterEncoding(4), 0);
    } finally {
      undo();
    }
    delivering = true;
    assert.equal(restAfterEncoding(4), 0, 'a stopped worker no longer slows encodes');
  });

  it('a worker that stops does not undo the check of the worker that replaced it', () => {
    const undoFirst = shareEncodesWith(() => true);
    const undoSecond = shareEncodesWith(() => true);
    undoFirst();
    assert.ok(restAfterEncoding(2) > 0);
    undoSecond();
    assert.equal(restAfterEncoding(2), 0);
  });
});
