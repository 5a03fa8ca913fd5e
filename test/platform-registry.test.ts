import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { STORAGE_LABEL, assertErrorEnvelope, closeSharedAudio, startTestApp, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { startLoopbackPlatform, type LoopbackPlatform } from './platforms/loopback/index.js';

after(async () => {
  await closeSharedAudio();
});

describe(`a fourth platform through the registry alone (${STORAGE_LABEL})`, () => {
  let loopback: LoopbackPlatform;
  let t: TestApp;
  let account: TestAccount;

  before(async () => {
    loopback = await startLoopbackPlatform();
    t = await startTestApp({ testPlatforms: [loopback.definition] });
    account = await t.createAccount();
  });

  after(() => closeAll(t, loopback));

  const body = (extra: Record<string, unknown> = {}) => ({
    platform: 'loopback',
    recipient: 'loop-alice',
    audio_url: t.mp3Url,
    session: { mailbox: 'box_1234' },
    ...extra,
  });

  it('a live send goes HTTP API → queue → audio pipeline → the platform\'s own adapter, in its own format', async () => {
    const res = await t.send(account.liveKey, body());
    assert.equal(res.statusCode, 202, res.body);
    const sent = res.json();
    assert.equal(sent.platform, 'loopback');
    const status = await t.waitForStatus(account.liveKey, sent.id, ['delivered', 'failed']);
    assert.equal(status.status, 'delivered', JSON.stringify(status));
    assert.equal(loopback.received.length, 1);
    const note = loopback.received[0]!;
    assert.deepEqual(
      { messageId: note.messageId, recipient: note.recipient, mailbox: note.mailbox, mimeType: note.mimeType },
      { messageId: sent.id, recipient: 'loop-alice', mailbox: 'box_1234', mimeType: 'audio/ogg; codecs=opus' },
    );
    // The MP3 source arrived converted to the platform's declared format: an Ogg stream.
    assert.equal(note.bytes.subarray(0, 4).toString('latin1'), 'OggS');
    assert.equal(note.seconds, 3, 'the duration the pipeline measured');
  });

  it('its rules are its own: recipient, session and duration limits answer 422 naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ recipient: 'bob' }, 'recipient'],
      [{ session: {} }, 'session.mailbox'],
      [{ session: { mailbox: 'nope' } }, 'session.mailbox'],
      [{ duration: 31 }, 'duration'],
      [{ caption: 'hi' }, 'caption'],
    ];
    for (const [extra, field] of cases) {
      const error = assertErrorEnvelope(await t.send(account.testKey, body(extra)), 422, 'invalid_parameter');
      assert.equal(error.details.field, field, JSON.stringify(error));
    }
  });

  it('sandbox keys simulate it like any platform', async () => {
    const res = await t.send(account.testKey, body());
    assert.equal(res.statusCode, 202, res.body);
    const status = await t.waitForStatus(account.testKey, res.json().id, ['delivered', 'failed']);
    assert.equal(status.status, 'delivered');
    assert.equal(loopback.received.length, 1, 'the sandbox never reaches the platform');
  });

  it('users never see it listed: usage.by_platform is exactly linkedin, telegram, whatsapp; an unknown platform lists only those', async () => {
    const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: account.liveKey });
    assert.equal(usage.statusCode, 200, usage.body);
    assert.deepEqual(Object.keys(usage.json().usage.by_platform), ['linkedin', 'telegram', 'whatsapp']);
    assert.equal(usage.json().usage.total_sent, 1);
    const error = assertErrorEnvelope(await t.send(account.liveKey, body({ platform: 'carrier-pigeon' })), 400, 'invalid_request');
    assert.equal(error.details.field, 'platform');
    assert.equal(error.message, 'platform must be one of linkedin, telegram, whatsapp');
  });
});

describe(`an app without the test platform (${STORAGE_LABEL})`, () => {
  it('does not know it: 400 invalid_request naming platform', async () => {
    const t = await startTestApp();
    try {
      const account = await t.createAccount();
      const res = await t.send(account.testKey, { platform: 'loopback', recipient: 'loop-alice', audio_url: t.voiceUrl, session: { mailbox: 'box_1234' } });
      const error = assertErrorEnvelope(res, 400, 'invalid_request');
      assert.equal(error.details.field, 'platform');
    } finally {
      await t.close();
    }
  });
});
