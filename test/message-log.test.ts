import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { messageAudioFile } from '../src/message-log/views.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  defaultSendBody,
  STORAGE_LABEL,
  startTestApp,
  type TestAccount,
  type TestApp,
} from './fixtures/app-harness.js';

/**
 * The message log: GET /messages (newest first, cursor paging, filters) and GET /messages/{id}
 * (attempts, audio as detected and converted, receipts), seen as a caller sees them.
 */

const STATUS_FIELDS = ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status'];
const LIST_FIELDS = [...STATUS_FIELDS, 'attempt_count', 'updated_at', 'send_at'].sort();

after(async () => {
  await closeSharedAudio();
});

describe(`message log (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let other: TestAccount;
  const ids: string[] = [];
  let failedId: string;
  let flakyId: string;
  let linkedinId: string;

  const list = async (query: string, key = account.testKey) => {
    const res = await t.request({ method: 'GET', url: `/api/v1/messages${query}`, key });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as { data: any[]; has_more: boolean };
  };

  before(async () => {
    t = await startTestApp();
    account = await t.createAccount();
    other = await t.createAccount();
    for (let i = 0; i < 5; i++) {
      const res = await t.send(account.testKey, { ...defaultSendBody('telegram', i === 0 ? t.mp3Url : t.voiceUrl), recipient: `12345678${i}` });
      assert.equal(res.statusCode, 202, res.body);
      ids.push(res.json().id);
    }
    failedId = (await t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '10000000002' })).json().id;
    flakyId = (await t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '10000000004' })).json().id;
    linkedinId = (await t.send(account.testKey, defaultSendBody('linkedin', t.voiceUrl))).json().id;
    for (const id of [...ids, linkedinId]) await t.waitForStatus(account.testKey, id, ['delivered']);
    await t.waitForStatus(account.testKey, failedId, ['failed']);
    await t.waitForStatus(account.testKey, flakyId, ['delivered'], 30_000);
  });
  after(async () => t.close());

  it('lists newest first with the status fields plus attempt_count and updated_at', async () => {
    const page = await list('');
    assert.equal(page.has_more, false);
    assert.deepEqual(page.data.map((m) => m.id), [linkedinId, flakyId, failedId, ...[...ids].reverse()]);
    for (const item of page.data) assert.deepEqual(Object.keys(item).sort(), LIST_FIELDS);
    const status = (await t.request({ method: 'GET', url: `/api/v1/status/${failedId}`, key: account.testKey })).json();
    assert.deepEqual(Object.keys(status).sort(), STATUS_FIELDS, 'the status lookup keeps its exact fields');
    const { attempt_count: _a, updated_at: _u, send_at: _s, ...rest } = page.data.find((m) => m.id === failedId);
    assert.deepEqual(rest, status);
    assert.equal(page.data.find((m) => m.id === flakyId).attempt_count, 3);
  });

  it('pages with starting_after and ending_before', async () => {
    const newestFirst = (await list('')).data.map((m) => m.id);
    const first = await list('?limit=3');
    assert.deepEqual(first.data.map((m) => m.id), newestFirst.slice(0, 3));
    assert.equal(first.has_more, true);
    const second = await list(`?limit=3&starting_after=${first.data[2].id}`);
    assert.deepEqual(second.data.map((m) => m.id), newestFirst.slice(3, 6));
    assert.equal(second.has_more, true);
    const third = await list(`?limit=3&starting_after=${second.data[2].id}`);
    assert.deepEqual(third.data.map((m) => m.id), newestFirst.slice(6));
    assert.equal(third.has_more, false);
    const back = await list(`?limit=3&ending_before=${third.data[0].id}`);
    assert.deepEqual(back.data.map((m) => m.id), newestFirst.slice(3, 6));
    assert.equal(back.has_more, true);
    const top = await list(`?limit=3&ending_before=${newestFirst[2]}`);
    assert.deepEqual(top.data.map((m) => m.id), newestFirst.slice(0, 2));
    assert.equal(top.has_more, false);
  });

  it('filters by status, platform, recipient and creation time', async () => {
    assert.deepEqual((await list('?status=failed')).data.map((m) => m.id), [failedId]);
    assert.deepEqual((await list('?platform=linkedin')).data.map((m) => m.id), [linkedinId]);
    assert.deepEqual((await list('?recipient=123456782')).data.map((m) => m.id), [ids[2]]);
    assert.deepEqual((await list('?status=delivered&platform=telegram&recipient=10000000004')).data.map((m) => m.id), [flakyId]);
    const created = (await list('')).data.find((m) => m.id === failedId).created_at;
    assert.deepEqual((await list(`?created_gte=${encodeURIComponent(created)}&created_lte=${encodeURIComponent(created)}`)).data.map((m) => m.id).includes(failedId), true);
    assert.deepEqual((await list(`?created_gte=${Math.floor(Date.now() / 1000) + 3600}`)).data, []);
    assert.deepEqual((await list('?created_lte=2020-01-01T00:00:00Z')).data, []);
  });

  it('shows only the key environment and account', async () => {
    assert.deepEqual((await list('', account.liveKey)).data, []);
    assert.deepEqual((await list('', other.testKey)).data, []);
    assertErrorEnvelope(await t.request({ method: 'GET', url: `/api/v1/messages/${ids[0]}`, key: other.testKey }), 404, 'not_found');
    assertErrorEnvelope(await t.request({ method: 'GET', url: `/api/v1/messages/${ids[0]}`, key: account.liveKey }), 404, 'not_found');
    assertErrorEnvelope(await t.request({ method: 'GET', url: '/api/v1/messages/msg_nope', key: account.testKey }), 404, 'not_found');
    assertErrorEnvelope(await t.request({ method: 'GET', url: '/api/v1/messages' }), 401, 'unauthorized');
  });

  it('answers bad query parameters with 422 naming the parameter', async () => {
    const cases: [string, string][] = [
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=ten', 'limit'],
      ['?status=sent', 'status'],
      ['?platform=signal', 'platform'],
      ['?created_gte=yesterday', 'created_gte'],
      ['?created_lte=2026-13-45T00:00:00Z', 'created_lte'],
      ['?starting_after=42', 'starting_after'],
      [`?starting_after=${ids[0]}&ending_before=${ids[1]}`, 'ending_before'],
    ];
    for (const [query, field] of cases) {
      const error = assertErrorEnvelope(await t.request({ method: 'GET', url: `/api/v1/messages${query}`, key: account.testKey }), 422, 'invalid_parameter');
      assert.equal(error.details.field, field, query);
    }
  });

  it('details each attempt with its outcome and error', async () => {
    const flaky = (await t.request({ method: 'GET', url: `/api/v1/messages/${flakyId}`, key: account.testKey })).json();
    assert.deepEqual(flaky.attempts.map((a: any) => [a.attempt, a.outcome, a.error?.code ?? null]), [
      [1, 'retry', 'platform_error'],
      [2, 'retry', 'platform_error'],
      [3, 'delivered', null],
    ]);
    assert.match(flaky.attempts[0].error.message, /transient/);
    assert.ok(Date.parse(flaky.attempts[0].next_attempt_at) <= Date.parse(flaky.attempts[1].started_at));
    const failed = (await t.request({ method: 'GET', url: `/api/v1/messages/${failedId}`, key: account.testKey })).json();
    assert.deepEqual(failed.attempts.map((a: any) => [a.outcome, a.error.code]), [['failed', 'recipient_not_found']]);
    assert.deepEqual(failed.error, { code: 'recipient_not_found', message: failed.attempts[0].error.message });
  });

  it('details the audio as detected and as converted, and serves the converted file while cached', async () => {
    const res = await t.request({ method: 'GET', url: `/api/v1/messages/${ids[0]}`, key: account.testKey });
    assert.equal(res.statusCode, 200, res.body);
    const detail = res.json();
    assert.equal(detail.audio_url, t.mp3Url);
    assert.equal(detail.audio.source.format, 'MPEG');
    assert.ok(detail.audio.source.size_bytes > 0);
    assert.ok(detail.audio.source.duration_seconds > 0);
    assert.equal(detail.audio.converted.format, 'ogg_opus');
    assert.equal(detail.audio.converted.mime_type, 'audio/ogg; codecs=opus');
    assert.ok(detail.audio.converted.size_bytes > 0);
    assert.equal(detail.audio.converted.waveform.length, 64);
    assert.equal(detail.audio.converted.cached, true);
    const file = await messageAudioFile(t.app.services.db.kysely, t.dataDir, { accountId: account.accountId, env: 'test' }, ids[0]!);
    assert.equal(file?.sizeBytes, detail.audio.converted.size_bytes);
    assert.equal(await messageAudioFile(t.app.services.db.kysely, t.dataDir, { accountId: other.accountId, env: 'test' }, ids[0]!), undefined);
  });

  it('says where a platform has no receipts', async () => {
    const telegram = (await t.request({ method: 'GET', url: `/api/v1/messages/${ids[1]}`, key: account.testKey })).json();
    assert.equal(telegram.receipts.supported, false);
    assert.match(telegram.receipts.reason, /Telegram/);
    const linkedin = (await t.request({ method: 'GET', url: `/api/v1/messages/${linkedinId}`, key: account.testKey })).json();
    assert.equal(linkedin.receipts.supported, false);
    assert.match(linkedin.receipts.reason, /LinkedIn/);
    assert.equal(linkedin.audio.converted.format, 'm4a_aac');
  });
});
