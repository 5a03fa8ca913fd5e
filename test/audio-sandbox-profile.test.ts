import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { messageAudioFile } from '../src/message-log/views.js';
import {
  acceptedMessageId as accepted,
  closeSharedAudio,
  connectedSandboxSession,
  defaultSendBody,
  STORAGE_LABEL,
  startTestApp,
  type TestAccount,
  type TestApp,
} from './fixtures/app-harness.js';
import { describeOggOpus } from './fixtures/ogg-opus-reader.js';

/**
 * The sandbox runs the live conversion: a WhatsApp note sent with an sk_test_ key is in WhatsApp's
 * native push-to-talk profile, and Telegram gets its own file from the same source.
 */

after(async () => {
  await closeSharedAudio();
});

describe(`sandbox audio per platform (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let session: string;

  before(async () => {
    t = await startTestApp();
    account = await t.createAccount();
    session = await connectedSandboxSession(t, account.testKey);
  });

  after(async () => {
    await t?.close();
  });

  async function convertedBytes(id: string): Promise<Buffer> {
    const message = await t.waitForStatus(account.testKey, id, ['delivered', 'failed']);
    assert.equal(message.status, 'delivered', JSON.stringify(message));
    const file = await messageAudioFile(t.app.services.db.kysely, t.dataDir, { accountId: account.accountId, env: 'test' }, id);
    assert.ok(file, 'the converted file is in the cache');
    return readFile(file.path);
  }

  it('a sandbox WhatsApp note is in the native push-to-talk profile; Telegram gets a 48 kHz file of its own', async () => {
    // The same MP3 and the same OGG Opus (mono, 48 kHz: not the profile) through both platforms.
    for (const url of [t.mp3Url, t.voiceUrl]) {
      const whatsapp = describeOggOpus(await convertedBytes(await accepted(t, account.testKey, defaultSendBody('whatsapp', url, session))));
      assert.equal(whatsapp.channels, 1);
      assert.equal(whatsapp.inputRate, 16000);
      assert.equal(whatsapp.preSkip, 312);
      assert.equal(whatsapp.vendor, 'voicenote');
      assert.deepEqual(whatsapp.comments, []);
      assert.ok(whatsapp.packets.every((p) => p.config === 9 && p.code === 3 && !p.stereo));
      assert.ok(whatsapp.packets.slice(0, -1).every((p) => p.frameSizes.length === 3));

      const telegram = describeOggOpus(await convertedBytes(await accepted(t, account.testKey, defaultSendBody('telegram', url))));
      assert.equal(telegram.inputRate, 48000);
      assert.deepEqual(telegram.comments, []);
      assert.doesNotMatch(telegram.vendor, /Lav[fc]/);
    }
    // The message log says what was sent, and the API's format stays `ogg_opus` for both.
    const list = (await t.request({ method: 'GET', url: '/api/v1/messages?platform=whatsapp', key: account.testKey })).json();
    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${list.data[0].id}`, key: account.testKey })).json();
    assert.equal(detail.audio.converted.format, 'ogg_opus');
    assert.equal(detail.audio.converted.cached, true);
  });
});
