import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { captureLogs } from './fixtures/log-capture.js';
import { lazyChild } from '../src/logger.js';

describe('lazyChild (a per-message logger made on first use)', () => {
  it('writes what a child writes: the bindings on every line, secrets among them redacted', () => {
    const { logger, lines } = captureLogs('info');
    const log = lazyChild(logger, { message_id: 'msg_1', attempt: 2, session: { bot_token: '123:secret' } });
    log.info('delivered');
    log.warn({ outcome: 'retry' }, 'outcome kept in memory');
    assert.equal(lines.length, 2);
    assert.deepEqual(
      lines.map((line) => [line.msg, line.message_id, line.attempt, line.session]),
      [
        ['delivered', 'msg_1', 2, '[redacted]'],
        ['outcome kept in memory', 'msg_1', 2, '[redacted]'],
      ],
    );
    assert.equal(lines[1]!.outcome, 'retry');
  });

  it('writes nothing at a level that is off, and still writes at the levels that are on', () => {
    const { logger, lines } = captureLogs('warn');
    const log = lazyChild(logger, { message_id: 'msg_2' });
    log.info('delivered');
    log.debug({ detail: 1 }, 'details');
    assert.equal(lines.length, 0);
    assert.equal(log.isLevelEnabled('info'), false);
    assert.equal(log.level, 'warn');
    log.error('unexpected error while handling a message');
    assert.deepEqual(
      lines.map((line) => [line.msg, line.message_id]),
      [['unexpected error while handling a message', 'msg_2']],
    );
  });
});
