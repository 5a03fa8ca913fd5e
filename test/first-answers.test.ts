import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { assertErrorEnvelope, closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestAccount, type TestApp } from './fixtures/app-harness.js';

/**
 * What a newcomer hears in the first minutes (issue 40, "the first five minutes"): each wrong step
 * answered with the question that is really wrong, in the documented error envelope.
 */
describe(`the first answers (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  before(async () => {
    t = await startTestApp({ worker: false });
    account = await t.createAccount();
  });
  after(async () => {
    await t?.close();
    await closeSharedAudio();
  });

  it('an unknown field is named before a required one is missed: {"audioUrl": …} is not "audio_url is required"', async () => {
    const res = await t.send(account.testKey, { platform: 'telegram', recipient: '123456789', audioUrl: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN } });
    const error = assertErrorEnvelope(res, 400, 'invalid_request');
    assert.equal(error.details.field, 'audioUrl');
    assert.match(error.message, /^unknown field audioUrl; known fields are platform, recipient, audio_url/);
  });

  it('an unknown platform is named before its missing session', async () => {
    const res = await t.send(account.testKey, { platform: 'signal', recipient: '123456789', audio_url: t.voiceUrl });
    const error = assertErrorEnvelope(res, 400, 'invalid_request');
    assert.equal(error.details.field, 'platform');
    assert.equal(error.message, 'platform must be one of linkedin, telegram, whatsapp');
  });

  it('a key sent without "Bearer " is told how to send it, not that it is missing', async () => {
    const bare = await t.request({ method: 'GET', url: '/api/v1/usage', headers: { authorization: account.testKey } });
    const error = assertErrorEnvelope(bare, 401, 'unauthorized');
    assert.match(error.message, /^the Authorization header must be "Bearer <API_KEY>"/);
    assert.ok(!bare.body.includes(account.testKey), 'the key is not echoed');
    const none = await t.request({ method: 'GET', url: '/api/v1/usage' });
    assert.match(assertErrorEnvelope(none, 401, 'unauthorized').message, /^missing API key/);
  });
});
