import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { runCli } from './fixtures/cli-process.js';

/**
 * The README's first send on a machine without internet: the service serves its own sample voice
 * note at /samples/hello.ogg, and a sandbox key may name it on the service's own (private) origin
 * while private addresses are otherwise refused. Live keys get no such exception.
 */

const SAMPLE = new URL('../assets/samples/hello.ogg', import.meta.url);

after(async () => {
  await closeSharedAudio();
});

describe(`the first send: the shipped sample (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let base: string;

  const send = (key: string, audioUrl: string, origin = base) =>
    fetch(`${origin}/api/v1/send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ platform: 'telegram', recipient: '123456789', audio_url: audioUrl, session: { bot_token: TELEGRAM_TOKEN } }),
    });

  before(async () => {
    t = await startTestApp({ env: { AUDIO_ALLOW_PRIVATE_URLS: 'false' } });
    account = await t.createAccount();
    base = await t.listen();
  });
  after(async () => {
    await t?.close();
  });

  it('serves the sample without a key', async () => {
    const res = await fetch(`${base}/samples/hello.ogg`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'audio/ogg');
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.deepEqual(bytes, await readFile(SAMPLE));
    assert.ok(bytes.length < 100 * 1024, `the sample is ${bytes.length} bytes`);
    const missing = await fetch(`${base}/samples/secret.key`);
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as any).error.code, 'not_found');
  });

  it('a sandbox send of the service’s own sample is delivered, with private URLs refused', async () => {
    const res = await send(account.testKey, `${base}/samples/hello.ogg`);
    const body = (await res.json()) as any;
    assert.equal(res.status, 202, JSON.stringify(body));
    const done = await t.waitForStatus(account.testKey, body.id, ['delivered', 'failed']);
    assert.equal(done.status, 'delivered', JSON.stringify(done));
    // The sandbox really converted it: the message log holds the audio's facts.
    const log = await t.request({ method: 'GET', url: `/api/v1/messages/${body.id}`, key: account.testKey });
    assert.equal(log.statusCode, 200, log.body);
  });

  it('the same URL with a live key is refused (private address)', async () => {
    const res = await send(account.liveKey, `${base}/samples/hello.ogg`);
    const body = (await res.json()) as any;
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(body.error.code, 'invalid_parameter');
    assert.equal(body.error.details.field, 'audio_url');
  });

  it('the README\'s command as typed: VOICENOTE_KEY, the default --url (127.0.0.1:$PORT), the sample at localhost:$PORT, --wait', async () => {
    const port = new URL(base).port;
    const run = await runCli(
      ['send', '--platform', 'telegram', '--recipient', '123456789', '--bot-token', TELEGRAM_TOKEN, '--audio', `http://localhost:${port}/samples/hello.ogg`, '--wait'],
      { PORT: port, VOICENOTE_KEY: account.testKey },
    );
    assert.equal(run.code, 0, run.stderr);
    const final = JSON.parse(run.stdout);
    assert.equal(final.status, 'delivered', run.stdout);
  });

  it('a sandbox key gets no exception for other private URLs, nor for a sample on another host', async () => {
    for (const url of [t.voiceUrl, `${base}/samples/other.ogg`, 'http://10.0.0.7/samples/hello.ogg', `${base}/api/v1/usage`]) {
      const res = await send(account.testKey, url);
      const body = (await res.json()) as any;
      assert.equal(res.status, 422, `${url}: ${JSON.stringify(body)}`);
      assert.equal(body.error.details.field, 'audio_url');
    }
  });

  it('a sample on the wrong port or address is answered with the URL that works, not advice to allow private addresses', async () => {
    const port = Number(new URL(base).port);
    for (const url of [`http://localhost:${port + 1}/samples/hello.ogg`, 'http://10.0.0.7/samples/hello.ogg']) {
      const res = await send(account.testKey, url);
      const body = (await res.json()) as any;
      assert.equal(res.status, 422, `${url}: ${JSON.stringify(body)}`);
      assert.equal(body.error.details.field, 'audio_url');
      assert.ok(body.error.message.includes(`use http://localhost:${port}/samples/hello.ogg`), body.error.message);
      assert.doesNotMatch(body.error.message, /ALLOW_PRIVATE_URLS/);
    }
    // A live key never gets the exception: it is told the sample is the sandbox's, not to loosen the check.
    const live = (await (await send(account.liveKey, `${base}/samples/hello.ogg`)).json()) as any;
    assert.match(live.error.message, /only sandbox keys \(sk_test_…\) may send; a live send needs a public audio_url/);
    assert.doesNotMatch(live.error.message, /ALLOW_PRIVATE_URLS/);
    // Any other private URL keeps the usual refusal and its hint.
    const other = (await (await send(account.testKey, t.voiceUrl)).json()) as any;
    assert.match(other.error.message, /ALLOW_PRIVATE_URLS/);
  });

  it('the Host header is not where the request came to: a forged Host names no sample of ours', async () => {
    const port = Number(new URL(base).port);
    const sendWithHost = (host: string, audioUrl: string): Promise<{ status: number; body: any }> =>
      new Promise((resolve, reject) => {
        const payload = JSON.stringify({ platform: 'telegram', recipient: '123456789', audio_url: audioUrl, session: { bot_token: TELEGRAM_TOKEN } });
        const req = httpRequest(
          { host: '127.0.0.1', port, method: 'POST', path: '/api/v1/send', timeout: 10_000, headers: { host, authorization: `Bearer ${account.testKey}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
          (res) => {
            let text = '';
            res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
          },
        );
        req.on('timeout', () => req.destroy(new Error('no answer in 10 s')));
        req.on('error', reject);
        req.end(payload);
      });
    // Came to 127.0.0.1:PORT, claims another machine or another port.
    for (const [host, url] of [
      ['10.0.0.7', 'http://10.0.0.7/samples/hello.ogg'],
      ['192.168.1.20:8080', 'http://192.168.1.20:8080/samples/hello.ogg'],
      [`localhost:${port + 1}`, `http://localhost:${port + 1}/samples/hello.ogg`],
    ] as const) {
      const res = await sendWithHost(host, url);
      assert.equal(res.status, 422, `Host ${host}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.details.field, 'audio_url');
    }
    // The address it really came to is recognised whatever the Host header says.
    const real = await sendWithHost('example.com', `http://127.0.0.1:${port}/samples/hello.ogg`);
    assert.equal(real.status, 202, JSON.stringify(real.body));
  });
});
