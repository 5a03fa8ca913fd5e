import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { createVoicenoteClient, type MessageStatus, type SendRequest, type VoicenoteClient } from '../clients/typescript/src/index.js';
import { ROOT } from './fixtures/cli-process.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';

/* The typed client (clients/typescript), generated from the served OpenAPI document, against a service listening on loopback. */

after(async () => {
  await closeSharedAudio();
});

describe(`typed TypeScript client (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let baseUrl: string;
  let client: VoicenoteClient;
  before(async () => {
    t = await startTestApp({ worker: true });
    baseUrl = await t.listen();
    const { testKey } = await t.createAccount({ plan: 'growth' });
    client = createVoicenoteClient({ baseUrl, apiKey: testKey });
  });
  after(async () => {
    await t.close();
  });

  test('its types were generated from the document this app serves: every served path is in them', async () => {
    const served = (await (await fetch(`${baseUrl}/api/v1/openapi.json`)).json()) as { paths: Record<string, unknown> };
    const generated = await readFile(path.join(ROOT, 'clients', 'typescript', 'src', 'schema.ts'), 'utf8');
    const missing = Object.keys(served.paths).filter((p) => !generated.includes(`"${p}": {`));
    assert.deepEqual(missing, [], 'npm run build (or typecheck) regenerates the types from the app');
  });

  test('send, then status until delivered, then usage: typed bodies and answers', async () => {
    const body: SendRequest = { platform: 'telegram', recipient: '123456789', audio_url: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN }, caption: 'hi' };
    const sent = await client.POST('/api/v1/send', { body, params: { header: { 'idempotency-key': 'client-test-1' } } });
    assert.equal(sent.response.status, 202, JSON.stringify(sent.error));
    // POST /send answers 200 only to a dry run: a real send's answer is the 202 message.
    assert.ok(sent.data && 'id' in sent.data);
    assert.match(sent.data.id, /^msg_[0-9A-Za-z]{24}$/);
    assert.equal(sent.data.status, 'queued');
    assert.equal(sent.data.platform, 'telegram');

    const replay = await client.POST('/api/v1/send', { body, params: { header: { 'idempotency-key': 'client-test-1' } } });
    assert.equal(replay.data && 'id' in replay.data ? replay.data.id : undefined, sent.data.id, 'Idempotency-Key passes through');
    assert.equal(replay.response.headers.get('idempotent-replayed'), 'true');

    let status: MessageStatus | undefined;
    for (let i = 0; i < 200 && status?.status !== 'delivered' && status?.status !== 'failed'; i++) {
      const { data } = await client.GET('/api/v1/status/{message_id}', { params: { path: { message_id: sent.data.id } } });
      status = data;
      if (status?.status !== 'delivered') await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status?.status, 'delivered', JSON.stringify(status));
    assert.equal(status?.error, null);

    const usage = await client.GET('/api/v1/usage');
    assert.equal(usage.data?.plan, 'growth');
    assert.equal(usage.data?.usage.total_sent, 1);
    assert.equal(usage.data?.limits.monthly_quota, 2000);
  });

  test('an error answer arrives typed as the error envelope', async () => {
    const refused = await client.POST('/api/v1/send', { body: { platform: 'telegram', recipient: 'nope', audio_url: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN } } });
    assert.equal(refused.response.status, 422);
    assert.equal(refused.data, undefined);
    assert.equal(refused.error?.error.code, 'invalid_parameter');
    assert.equal(refused.error?.error.details?.field, 'recipient');

    const missing = await client.GET('/api/v1/status/{message_id}', { params: { path: { message_id: 'msg_doesnotexist' } } });
    assert.equal(missing.response.status, 404);
    assert.equal(missing.error?.error.code, 'not_found');

    const anonymous = createVoicenoteClient({ baseUrl, apiKey: 'sk_test_wrong' });
    const denied = await anonymous.GET('/api/v1/usage');
    assert.equal(denied.response.status, 401);
    assert.equal(denied.error?.error.code, 'unauthorized');
  });

  test('a scheduled send (send_at), then canceled: typed body and answers, not_cancelable the second time', async () => {
    const sendAt = new Date(Date.now() + 86_400_000).toISOString();
    const body: SendRequest = { platform: 'telegram', recipient: '123456789', audio_url: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN }, send_at: sendAt };
    const sent = await client.POST('/api/v1/send', { body });
    assert.equal(sent.response.status, 202, JSON.stringify(sent.error));
    assert.ok(sent.data && 'id' in sent.data);
    const path = { message_id: sent.data.id };
    const canceled = await client.POST('/api/v1/messages/{message_id}/cancel', { params: { path } });
    assert.equal(canceled.response.status, 200, JSON.stringify(canceled.error));
    const status: MessageStatus | undefined = canceled.data;
    assert.equal(status?.status, 'canceled');
    const again = await client.POST('/api/v1/messages/{message_id}/cancel', { params: { path } });
    assert.equal(again.response.status, 409);
    assert.equal(again.error?.error.code, 'not_cancelable');
    assert.equal(again.error?.error.details?.status, 'canceled');
    const logged = await client.GET('/api/v1/messages/{message_id}', { params: { path } });
    assert.equal(logged.data?.send_at, sendAt);
  });

  test('WhatsApp sessions: create, read, list, delete', async () => {
    const created = await client.POST('/api/v1/whatsapp/sessions', {});
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    const id = created.data!.session_id;
    assert.match(id, /^ws_/);
    assert.match(created.data!.qr_code ?? '', /^data:image\/png;base64,/);
    const one = await client.GET('/api/v1/whatsapp/sessions/{session_id}', { params: { path: { session_id: id } } });
    assert.equal(one.data?.session_id, id);
    const list = await client.GET('/api/v1/whatsapp/sessions');
    assert.ok(list.data?.sessions.some((s) => s.id === id));
    const deleted = await client.DELETE('/api/v1/whatsapp/sessions/{session_id}', { params: { path: { session_id: id } } });
    assert.equal(deleted.data?.deleted, true);
  });
});
