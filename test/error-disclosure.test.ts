/**
 * What a refused audio or webhook host is told: one sentence, with no name and no address, the same
 * whether the name resolves to a private address or does not resolve at all (told apart, they map an
 * internal resolver's names and addresses). The operator's log has the detail. A platform that cannot
 * be reached is named by the error's code, never by the address tried.
 */
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type LookupFunction } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { createAudioAgent, fetchAudio } from '../src/audio/fetch.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';
import { captureLogs } from './fixtures/log-capture.js';
import { eventually } from './fixtures/eventually.js';

after(closeSharedAudio);

const DNS: Record<string, LookupAddress[]> = {
  'db-internal': [{ address: '10.23.45.67', family: 4 }],
  'cache-internal.corp.test': [{ address: 'fd12:3456::9', family: 6 }],
  'metadata.corp.test': [{ address: '169.254.169.254', family: 4 }],
};
const lookup: LookupFunction = (hostname, options, callback) => {
  const answers = DNS[hostname];
  if (!answers) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
  if (options.all) return callback(null, answers);
  callback(null, answers[0]!.address, answers[0]!.family);
};

const HOSTS = ['db-internal:5432', 'cache-internal.corp.test', 'metadata.corp.test', 'nothing-here-internal:5432', 'no-such-name.corp.test'];
const SECRETS_OF_THE_INSIDE = /db-internal|cache-internal|metadata|nothing-here|no-such-name|10\.23|fd12|169\.254|resolve|exist|ENOTFOUND|private|range/i;

describe('a refused audio host is told nothing about the inside', () => {
  it('names resolving to private addresses and names that do not resolve get one and the same error, without name or address; the log has the detail', async (t) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'voicenote-disclosure-'));
    const refused: Array<{ host: string; reason: string }> = [];
    const agent = createAudioAgent({ allowPrivate: false, lookup, onRefused: (d) => refused.push(d) });
    t.after(async () => {
      await agent.close();
      await rm(dir, { recursive: true, force: true });
    });
    const seen = new Set<string>();
    for (const [i, host] of HOSTS.entries()) {
      const error = await fetchAudio({ url: `http://${host}/x.ogg`, destPath: path.join(dir, `f${i}`), maxBytes: 1_000_000, timeoutMs: 5_000, allowPrivate: false, dispatcher: agent }).then(
        () => assert.fail(`${host} was fetched`),
        (e: unknown) => e as { code: string; message: string; transient: boolean },
      );
      assert.equal(error.code, 'audio_fetch_blocked', host);
      assert.equal(error.transient, false, host);
      assert.doesNotMatch(error.message, SECRETS_OF_THE_INSIDE, host);
      seen.add(`${error.code}: ${error.message}`);
    }
    assert.deepEqual([...seen], ['audio_fetch_blocked: the audio host is not a public address']);
    // The operator learns which host and why.
    assert.equal(refused.length, HOSTS.length);
    assert.match(refused[0]!.host, /db-internal/);
    assert.match(refused[0]!.reason, /10\.23\.45\.67/);
    assert.match(refused[3]!.reason, /does not resolve \(ENOTFOUND\)/);
  });
});

describe(`a refused webhook host is told nothing about the inside (${STORAGE_LABEL})`, () => {
  it('the delivery log says "the webhook host is not a public address" for every internal name, resolving or not; the operator\'s log names it', async (t) => {
    const { lines, logger } = captureLogs();
    const app = await startTestApp({ worker: false, logger, env: { AUDIO_ALLOW_PRIVATE_URLS: 'false' }, webhooks: { retryDelaysMs: [], pollMs: 50, lookup } });
    t.after(() => app.close());
    const account = await app.createAccount();
    const errors = new Set<string>();
    for (const host of ['db-internal:5432', 'nothing-here-internal:5432']) {
      const created = await app.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: account.testKey, body: { url: `http://${host}/hook` } });
      assert.equal(created.statusCode, 201, created.body);
      const id = created.json().id;
      assert.equal((await app.request({ method: 'POST', url: `/api/v1/webhook_endpoints/${id}/test`, key: account.testKey })).statusCode, 202);
      const failed = await eventually(async () => {
        const list = (await app.request({ method: 'GET', url: `/api/v1/webhook_endpoints/${id}/deliveries`, key: account.testKey })).json().data as any[];
        return list.find((d) => d.status === 'failed');
      }, `the delivery to ${host} to fail`, 20_000);
      for (const answer of failed.answers) {
        assert.doesNotMatch(answer.error, SECRETS_OF_THE_INSIDE, host);
        errors.add(answer.error);
      }
    }
    assert.deepEqual([...errors], ['refused: the webhook host is not a public address']);
    const logged = lines.filter((l) => l.msg === 'webhook delivery refused: the host is not a public address');
    assert.ok(logged.some((l) => /db-internal/.test(String(l.webhook_host)) && /10\.23\.45\.67/.test(String(l.reason))), JSON.stringify(logged));
    assert.ok(logged.some((l) => /nothing-here-internal/.test(String(l.webhook_host)) && /does not resolve/.test(String(l.reason))), JSON.stringify(logged));
  });
});

/** A loopback port nothing listens on: connecting to it is refused. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

describe(`a platform that cannot be reached is named by the error's code, not its address (${STORAGE_LABEL})`, () => {
  it('a Telegram Bot API root that refuses: the attempt, GET /status and the voice_note.failed webhook say ECONNREFUSED, never the address', async (t) => {
    const port = await closedPort();
    const receiver = await startWebhookReceiver();
    const app = await startTestApp({ env: { TELEGRAM_API_ROOT: `http://127.0.0.1:${port}` } });
    t.after(async () => {
      await app.close();
      await receiver.close();
    });
    const account = await app.createAccount();
    const hook = await app.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: account.liveKey, body: { url: receiver.url('/hooks'), events: ['voice_note.failed'] } });
    assert.equal(hook.statusCode, 201, hook.body);
    const sent = await app.send(account.liveKey, defaultSendBody('telegram', app.voiceUrl));
    assert.equal(sent.statusCode, 202, sent.body);
    const id = sent.json<{ id: string }>().id;
    const address = new RegExp(`127\\.0\\.0\\.1|${port}`);

    const attempt = await eventually(async () => {
      const res = await app.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: account.liveKey });
      return (res.json().attempts as Array<{ error: { code: string; message: string } | null }>).find((a) => a.error !== null)?.error;
    }, 'the first attempt to fail', 20_000);
    assert.deepEqual(attempt, { code: 'platform_error', message: 'could not reach Telegram (ECONNREFUSED)' });

    // The retry window spent: the next attempt is the last one, and the note fails.
    const db = app.app.services.db.kysely;
    await db.updateTable('messages').set({ created_at: Date.now() - 2 * 60 * 60_000, next_attempt_at: Date.now() }).where('id', '=', id).execute();
    const failed = await app.waitForStatus(account.liveKey, id, ['failed'], 20_000);
    assert.deepEqual(failed.error, { code: 'platform_error', message: 'could not reach Telegram (ECONNREFUSED)' });
    const [event] = await receiver.waitFor(1, 'voice_note.failed');
    const body = JSON.parse(event!.body) as { data: { id: string; error: { message: string } } };
    assert.equal(body.data.id, id);
    assert.match(body.data.error.message, /\(ECONNREFUSED\)/);
    assert.doesNotMatch(event!.body, address);
    assert.doesNotMatch(JSON.stringify(failed), address);
  });
});
