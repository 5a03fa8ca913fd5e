import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, LINKEDIN_SESSION, STORAGE_LABEL, startTestApp, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { probeWithFfmpeg, testFfmpegPath } from './fixtures/audio-fixtures.js';
import { startLinkedinVoyagerFake, type LinkedinVoyagerFake, type VoyagerAccount } from './fakes/linkedin-voyager.js';

/**
 * Live LinkedIn delivery end to end: a send with an `sk_live_` key goes through the queue, the audio
 * pipeline and the Voyager adapter to a strict local fake of linkedin.com, and the outcome shows in
 * GET /status. What is asserted is what the user sees and what "LinkedIn" received.
 */

const JANE = { publicId: 'jane-smith-a1b2c3', urn: 'urn:li:fsd_profile:ACoAABjaneSmith01' };
const JOSE = { publicId: 'josé-garcía-12', urn: 'urn:li:fsd_profile:ACoAABjoseGarcia2' };
// Small enough to keep the file quick, large enough that spacing is not an accident of scheduling.
const PACE = { minMs: 700, maxMs: 900 };
// Per-call timeout of the adapter here: short, so a lost answer is noticed quickly.
const PACE_TIMEOUT_MS = 4_000;

after(async () => {
  await closeSharedAudio();
});

describe(`LinkedIn live delivery through Voyager (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let fake: LinkedinVoyagerFake;
  let account: TestAccount;
  let workDir: string;
  const sessions: VoyagerAccount[] = [];
  /** Every body the API showed the user, to look for leaked secrets at the end. */
  const shown: string[] = [];

  /** A LinkedIn account of its own per test, so neither pacing nor flow state carries over between tests. */
  function newSession(): VoyagerAccount {
    const id = randomBytes(6).toString('hex');
    const session: VoyagerAccount = {
      liAt: `AQEDAQ${randomBytes(18).toString('base64url')}`,
      csrfToken: `ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}`,
      profileUrn: `urn:li:fsd_profile:ACoAAB${id}`,
    };
    fake.addAccount(session);
    sessions.push(session);
    return session;
  }

  async function send(session: VoyagerAccount, recipient: string, csrfToken = session.csrfToken): Promise<string> {
    const body = { ...defaultSendBody('linkedin', t.mp3Url), recipient, session: { li_at: session.liAt, csrf_token: csrfToken } };
    const res = await t.send(account.liveKey, body);
    shown.push(res.body);
    assert.equal(res.statusCode, 202, res.body);
    return res.json().id as string;
  }

  async function outcome(id: string, timeoutMs?: number): Promise<any> {
    const status = await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'], timeoutMs);
    shown.push(JSON.stringify(status));
    return status;
  }

  function assertFailed(status: any, code: string): void {
    assert.equal(status.status, 'failed', JSON.stringify(status));
    assert.equal(status.error.code, code, JSON.stringify(status));
    assert.equal(typeof status.error.message, 'string');
    assert.equal(status.delivered_at, null);
  }

  before(async () => {
    fake = await startLinkedinVoyagerFake({ profiles: [JANE, JOSE] });
    t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot }, linkedinPace: { ...PACE, timeoutMs: PACE_TIMEOUT_MS } });
    account = await t.createAccount({ plan: 'growth' });
    workDir = await mkdtemp(join(tmpdir(), 'voicenote-linkedin-'));
  });

  after(async () => {
    await t?.close();
    await fake?.close();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it('converts an mp3 to M4A AAC mono, uploads it to the slot and sends it as a voice note', async () => {
    assert.match(account.liveKey, /^sk_live_/);
    const session = newSession();
    fake.setUploadHeaders({ 'media-type-family': 'AUDIO', 'x-upload-ticket': randomBytes(6).toString('hex') });
    try {
      const id = await send(session, JANE.publicId);
      const status = await outcome(id);
      assert.equal(status.status, 'delivered', JSON.stringify(status));
      assert.equal(status.error, null);
      assert.equal(status.platform, 'linkedin');
      assert.equal(status.recipient, JANE.publicId);
      assert.ok(Date.parse(status.delivered_at) >= Date.parse(status.created_at));
    } finally {
      fake.setUploadHeaders({});
    }
    assert.deepEqual(fake.violations, []);
    assert.deepEqual(
      fake.calls.filter((c) => c.liAt === session.liAt).map((c) => c.step),
      ['me', 'profile', 'uploadMetadata', 'upload', 'createMessage'],
    );

    const [upload] = fake.uploads.filter((u) => u.liAt === session.liAt);
    assert.ok(upload, 'the audio reached the upload slot');
    assert.equal(upload.headers['media-type-family'], 'AUDIO');
    const file = join(workDir, 'uploaded.m4a');
    await writeFile(file, upload.bytes);
    const probed = await probeWithFfmpeg(await testFfmpegPath(), file);
    assert.match(probed.container, /mp4|m4a/);
    assert.equal(probed.codec, 'aac');
    assert.match(probed.profile ?? '', /LC/);
    assert.equal(probed.channels, 1);
    assert.equal(probed.hasVideo, false);

    const [message] = fake.messages.filter((m) => m.liAt === session.liAt);
    assert.ok(message, 'createMessage reached LinkedIn');
    const audio = message.body.message.renderContentUnions[0].audio;
    assert.deepEqual(Object.keys(audio).sort(), ['assetUrn', 'byteSize', 'duration']);
    assert.equal(audio.assetUrn, upload.assetUrn);
    assert.equal(audio.byteSize, upload.bytes.length, 'byteSize is the number of bytes uploaded');
    assert.equal(message.body.dedupeByClientGeneratedToken, false, 'as the web app and every public client send it');
    assert.equal([...message.body.trackingId].length, 16);
    assert.match(message.body.message.originToken, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const createCall = fake.callsOf('createMessage', session.liAt)[0]!;
    assert.equal(createCall.headers['content-type'], 'text/plain;charset=UTF-8');
    assert.equal(message.body.mailboxUrn, session.profileUrn);
    assert.deepEqual(message.body.hostRecipientUrns, [JANE.urn]);
    assert.ok(Math.abs(audio.duration - probed.durationSeconds * 1000) <= 150, `duration ${audio.duration} ms vs ${probed.durationSeconds} s of audio`);
  });

  it('a retry after a lost createMessage answer carries the same originToken', async () => {
    const session = newSession();
    // LinkedIn takes the message but its answer arrives after the adapter stopped waiting.
    fake.stallNextAcceptedMessage(PACE_TIMEOUT_MS * 3);
    const id = await send(session, JOSE.urn);
    const status = await outcome(id, 60_000);
    assert.equal(status.status, 'delivered', JSON.stringify(status));
    assert.deepEqual(fake.violations, []);
    const creates = fake.callsOf('createMessage', session.liAt);
    assert.equal(creates.length, 2, 'the attempt whose answer was lost, and the retry');
    const tokens = creates.map((c) => (c.body as any).message.originToken);
    assert.equal(tokens[0], tokens[1], 'both attempts carry one originToken');
    // Whether LinkedIn drops the repeat is not known (docs/platforms.md): the web app's flag is sent as it sends it.
    for (const c of creates) assert.equal((c.body as any).dedupeByClientGeneratedToken, false);
    // Another message gets another token.
    const other = await send(session, JANE.publicId);
    assert.equal((await outcome(other)).status, 'delivered');
    const third = fake.callsOf('createMessage', session.liAt)[2]!;
    assert.notEqual((third.body as any).message.originToken, tokens[0]);
  });

  it('finds the recipient from a profile URL (percent-encoded too) and takes a profile URN as it is', async () => {
    const byUrl = newSession();
    const byEncodedUrl = newSession();
    const byUrn = newSession();
    const ids = await Promise.all([
      send(byUrl, `https://www.linkedin.com/in/${JANE.publicId}/`),
      send(byEncodedUrl, `https://linkedin.com/in/${encodeURIComponent(JOSE.publicId)}`),
      send(byUrn, JANE.urn),
    ]);
    for (const id of ids) assert.equal((await outcome(id)).status, 'delivered');
    assert.deepEqual(fake.violations, []);

    const recipientOf = (s: VoyagerAccount) => fake.messages.find((m) => m.liAt === s.liAt)?.body.hostRecipientUrns;
    assert.deepEqual(recipientOf(byUrl), [JANE.urn]);
    assert.deepEqual(recipientOf(byEncodedUrl), [JOSE.urn]);
    assert.deepEqual(recipientOf(byUrn), [JANE.urn]);
    const lookup = fake.callsOf('profile', byEncodedUrl.liAt)[0];
    assert.equal(new URL(lookup!.path, fake.apiRoot).searchParams.get('memberIdentity'), JOSE.publicId);
    assert.equal(fake.callsOf('profile', byUrn.liAt).length, 0, 'a URN needs no lookup');
  });

  it('fails with session_expired when LinkedIn answers 401, or redirects to the login page, without following it', async () => {
    const unauthorized = newSession();
    const redirected = newSession();
    fake.expire(unauthorized.liAt, 'unauthorized');
    fake.expire(redirected.liAt, 'login-redirect');
    const [a, b] = await Promise.all([send(unauthorized, JANE.publicId), send(redirected, JANE.publicId)]);
    assertFailed(await outcome(a!), 'session_expired');
    assertFailed(await outcome(b!), 'session_expired');
    assert.deepEqual(fake.callsOf('me', unauthorized.liAt).map((c) => c.status), [401], 'permanent: tried once');
    assert.deepEqual(fake.callsOf('me', redirected.liAt).map((c) => c.status), [302]);
    assert.equal(fake.calls.filter((c) => c.path.startsWith('/login')).length, 0, 'the redirect is not followed');
    assert.deepEqual(fake.violations, []);
  });

  it('fails with invalid_session when LinkedIn answers 403 "CSRF check failed." (a csrf_token of another session)', async () => {
    const session = newSession();
    const id = await send(session, JANE.publicId, 'ajax:999999999999');
    const status = await outcome(id);
    assertFailed(status, 'invalid_session');
    assert.match(status.error.message, /CSRF check failed/);
    assert.deepEqual(fake.callsOf('me', session.liAt).map((c) => c.status), [403], 'permanent: tried once');
    assert.equal(fake.csrfRefusals.filter((c) => c.liAt === session.liAt).length, 1);
    assert.deepEqual(fake.violations, []);
  });

  it('fails with recipient_not_found for an unknown public id (empty list or 404), before uploading anything', async () => {
    const empty = newSession();
    const missing = newSession();
    const a = await send(empty, 'nobody-by-this-name-9');
    assertFailed(await outcome(a), 'recipient_not_found');
    fake.setUnknownProfileAnswer('not-found');
    try {
      const b = await send(missing, 'https://www.linkedin.com/in/nobody-at-all-404');
      assertFailed(await outcome(b), 'recipient_not_found');
    } finally {
      fake.setUnknownProfileAnswer('empty');
    }
    assert.deepEqual(fake.callsOf('profile', missing.liAt).map((c) => c.status), [404]);
    for (const s of [empty, missing]) {
      assert.equal(fake.callsOf('uploadMetadata', s.liAt).length, 0);
      assert.equal(fake.callsOf('createMessage', s.liAt).length, 0);
    }
    assert.deepEqual(fake.violations, []);
  });

  it('retries after a 429, honouring Retry-After, then delivers', async () => {
    const session = newSession();
    // Longer than the first backoff step (about 2 s), so an ignored Retry-After shows.
    fake.failNext('createMessage', { status: 429, headers: { 'retry-after': '3' } });
    const id = await send(session, JANE.publicId);
    const status = await outcome(id);
    assert.equal(status.status, 'delivered', JSON.stringify(status));
    const sends = fake.callsOf('createMessage', session.liAt);
    assert.deepEqual(sends.map((c) => c.status), [429, 200]);
    assert.ok(sends[1]!.at - sends[0]!.at >= 3000, `retried ${Math.round(sends[1]!.at - sends[0]!.at)} ms after a Retry-After of 3 s`);
    assert.equal(fake.messages.filter((m) => m.liAt === session.liAt).length, 1, 'one voice note, not two');
    assert.deepEqual(fake.violations, []);
  });

  it('retries two server errors with backoff, then delivers', async () => {
    const session = newSession();
    fake.failNext('uploadMetadata', { status: 500, times: 2 });
    const id = await send(session, JANE.publicId);
    const status = await outcome(id, 30_000);
    assert.equal(status.status, 'delivered', JSON.stringify(status));
    assert.deepEqual(fake.callsOf('uploadMetadata', session.liAt).map((c) => c.status), [500, 500, 200]);
    assert.equal(fake.messages.filter((m) => m.liAt === session.liAt).length, 1);
    assert.deepEqual(fake.violations, []);
  });

  it('spaces sends of one li_at by the pacing interval without holding up other accounts', async () => {
    const busy = newSession();
    const other = newSession();
    // Three at once: one goes, one waits its turn, the third is handed back to the queue and comes back.
    const ids = await Promise.all([send(busy, JANE.publicId), send(busy, JOSE.urn), send(busy, JANE.urn), send(other, JANE.publicId)]);
    for (const id of ids) assert.equal((await outcome(id)).status, 'delivered');
    assert.deepEqual(fake.violations, []);
    const sends = fake.messages.filter((m) => m.liAt === busy.liAt).map((m) => m.at);
    assert.equal(sends.length, 3, 'each voice note sent once');
    for (let i = 1; i < sends.length; i++) {
      const gap = sends[i]! - sends[i - 1]!;
      assert.ok(gap >= PACE.minMs, `sends of one li_at ${Math.round(gap)} ms apart; pace is at least ${PACE.minMs} ms`);
    }
    // The next delivery of the account starts only after the gap: no request of it in between.
    const busyCalls = fake.calls.filter((c) => c.liAt === busy.liAt);
    const afterFirst = busyCalls[busyCalls.findIndex((c) => c.step === 'createMessage') + 1]!;
    assert.equal(afterFirst.step, 'me');
    assert.ok(afterFirst.at - sends[0]! >= PACE.minMs, 'the whole next delivery waits, not only its createMessage');
    const otherSend = fake.messages.find((m) => m.liAt === other.liAt)!;
    assert.ok(otherSend.at < sends[1]!, 'another account is not queued behind the paced one');
  });

  it('never shows the li_at or csrf_token in any body the API returned', () => {
    assert.ok(shown.length > 10);
    const everything = shown.join('\n');
    for (const s of [...sessions, { liAt: LINKEDIN_SESSION.li_at, csrfToken: LINKEDIN_SESSION.csrf_token }]) {
      assert.ok(!everything.includes(s.liAt), 'li_at leaked into an API response');
      assert.ok(!everything.includes(s.csrfToken), 'csrf_token leaked into an API response');
    }
  });
});
