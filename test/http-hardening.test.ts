/**
 * Slow and malformed clients at the socket level: request, header and body timeouts, the connection
 * cap, answers in the error envelope for what Node's HTTP parser refuses, and a process that stays up
 * at its descriptor limit. Raw TCP sockets on loopback: an HTTP client library would refuse to send
 * most of these requests.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe } from 'node:test';
import { machineLoad, test } from './fixtures/timed.js';
import { maxConnectionsFor, maxPerAddressFor } from '../src/api/http-limits.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { BIN, childEnv, ROOT } from './fixtures/cli-process.js';

after(closeSharedAudio);

interface RawExchange {
  /** Everything the server wrote before the socket closed. */
  received: string;
  /** True when the server closed (or reset) the socket; false when the test gave up waiting. */
  closed: boolean;
}

/** Writes `data` on a fresh socket and collects what comes back until the server closes it (or `giveUpMs`). */
function rawExchange(port: number, data: string, giveUpMs = 20_000): Promise<RawExchange> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(data));
    let received = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
    socket.on('error', () => undefined);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ received, closed: false });
    }, giveUpMs);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ received, closed: true });
    });
  });
}

/** The status line and the parsed envelope of a raw HTTP answer. */
function parseAnswer(raw: string): { status: number; headers: string; body: any } {
  const [head = '', body = ''] = raw.split('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  return { status, headers: head, body: JSON.parse(body) };
}

function assertEnvelope(raw: string, status: number, code: string): void {
  const answer = parseAnswer(raw);
  assert.equal(answer.status, status, raw);
  assert.match(answer.headers, /content-type: application\/json/i);
  assert.deepEqual(Object.keys(answer.body.error).sort(), ['code', 'details', 'message']);
  assert.equal(answer.body.error.code, code);
}

async function portOf(app: TestApp): Promise<number> {
  return Number(new URL(await app.listen()).port);
}

describe(`slow clients are closed after the timeouts (${STORAGE_LABEL})`, () => {
  test('a body that stops after 5 of the 60,000 bytes promised: 408 request_timeout in the envelope, then the socket is closed', async (t) => {
    const app = await startTestApp({ worker: false, env: { HTTP_HEADERS_TIMEOUT_MS: '300', HTTP_REQUEST_TIMEOUT_MS: '600' } });
    t.after(() => app.close());
    const account = await app.createAccount();
    const port = await portOf(app);
    const exchange = await rawExchange(
      port,
      `POST /api/v1/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${account.testKey}\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{"a":`,
    );
    assert.ok(exchange.closed, `the server never closed the socket; received: ${exchange.received}`);
    assertEnvelope(exchange.received, 408, 'request_timeout');

    // The service answers others meanwhile and after.
    assert.equal((await app.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).statusCode, 200);
  });

  test('headers that never end: 408 in the envelope, then closed', async (t) => {
    const app = await startTestApp({ worker: false, env: { HTTP_HEADERS_TIMEOUT_MS: '300', HTTP_REQUEST_TIMEOUT_MS: '600' } });
    t.after(() => app.close());
    const exchange = await rawExchange(await portOf(app), 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    assert.ok(exchange.closed, 'closed');
    assertEnvelope(exchange.received, 408, 'request_timeout');
  });

  test('a request answered before its body arrived (401, no key) gets no second, stray answer when the body then times out', async (t) => {
    const app = await startTestApp({ worker: false, env: { HTTP_HEADERS_TIMEOUT_MS: '300', HTTP_REQUEST_TIMEOUT_MS: '600' } });
    t.after(() => app.close());
    const exchange = await rawExchange(await portOf(app), 'POST /api/v1/send HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{"a":');
    assert.ok(exchange.closed, 'closed');
    assert.equal(exchange.received.match(/^HTTP\/1\.1 /gm)?.length, 1, exchange.received);
    assert.match(exchange.received, /^HTTP\/1\.1 401 /);
  });

  test('an idle keep-alive connection is closed after HTTP_KEEP_ALIVE_TIMEOUT_MS', async (t) => {
    const app = await startTestApp({ worker: false, env: { HTTP_KEEP_ALIVE_TIMEOUT_MS: '300' } });
    t.after(() => app.close());
    const exchange = await rawExchange(await portOf(app), 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.ok(exchange.closed, 'closed');
    assert.match(exchange.received, /^HTTP\/1\.1 200 /);
    assert.match(exchange.received, /Keep-Alive: timeout=0/i);
  });
});

describe(`the connection cap (${STORAGE_LABEL})`, () => {
  test('at HTTP_MAX_CONNECTIONS further connections are closed unanswered, while requests that fit are answered', async (t) => {
    const app = await startTestApp({ worker: false, env: { HTTP_MAX_CONNECTIONS: '4', HTTP_MAX_CONNECTIONS_PER_ADDRESS: '0', HTTP_HEADERS_TIMEOUT_MS: '60000', HTTP_REQUEST_TIMEOUT_MS: '60000' } });
    // Slow clients first: closing waits for requests in flight.
    const slow: net.Socket[] = [];
    t.after(async () => {
      slow.forEach((s) => s.destroy());
      await app.close();
    });
    const port = await portOf(app);
    // Three slow clients hold three of the four places.
    for (let i = 0; i < 3; i++) {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      slow.push(socket);
    }
    // The fourth place answers.
    const fits = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.match(fits.received, /^HTTP\/1\.1 200 /);

    // A fourth slow client takes the last place: the next connections are closed without an answer.
    const fourth = net.connect(port, '127.0.0.1');
    fourth.on('error', () => undefined);
    await new Promise((resolve) => fourth.once('connect', resolve));
    fourth.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    slow.push(fourth);
    // The server counts the connection once it has accepted it: wait until it has.
    for (let i = 0; i < 100 && (await connectionCount(app)) < 4; i++) await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 3; i++) {
      const refused = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      assert.ok(refused.closed);
      assert.equal(refused.received, '', 'closed without an answer');
    }

    // A place freed is a place taken again.
    fourth.destroy();
    let status = '';
    for (let i = 0; i < 100 && !status.startsWith('HTTP/1.1 200'); i++) {
      status = (await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).received;
      if (!status) await new Promise((r) => setTimeout(r, 20));
    }
    assert.match(status, /^HTTP\/1\.1 200 /);
  });

  test('by default: 1,000, or three quarters of the descriptor limit when that is lower', () => {
    const limits = { headersTimeoutMs: 1, requestTimeoutMs: 1, keepAliveTimeoutMs: 1, maxRequestsPerSocket: 1, maxConnections: undefined, maxConnectionsPerAddress: undefined };
    assert.equal(maxConnectionsFor(limits, 1_048_576), 1_000);
    assert.equal(maxConnectionsFor(limits, 256), 192);
    assert.equal(maxConnectionsFor(limits, undefined), 1_000);
    assert.equal(maxConnectionsFor({ ...limits, maxConnections: 5_000 }, 256), 5_000, 'HTTP_MAX_CONNECTIONS when set');
    assert.equal(maxPerAddressFor(limits, 192, false), 10, 'one address: a twentieth of the places');
    assert.equal(maxPerAddressFor(limits, 192, true), 0, 'behind a trusted proxy every client shares its address: no cap per address');
    assert.equal(maxPerAddressFor({ ...limits, maxConnectionsPerAddress: 7 }, 192, true), 7);
  });

  test('one address holding its share of the places is refused more, while another address is answered', async (t) => {
    const app = await startTestApp({ worker: false, env: { HTTP_MAX_CONNECTIONS: '60', HTTP_HEADERS_TIMEOUT_MS: '60000', HTTP_REQUEST_TIMEOUT_MS: '60000' } });
    const slow: net.Socket[] = [];
    t.after(async () => {
      slow.forEach((s) => s.destroy());
      await app.close();
    });
    const port = await portOf(app);
    for (let i = 0; i < 3; i++) {
      const socket = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.1' });
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      slow.push(socket);
    }
    for (let i = 0; i < 100 && (await connectionCount(app)) < 3; i++) await new Promise((r) => setTimeout(r, 20));
    const refused = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(refused.received, '', 'a fourth connection from 127.0.0.1 is closed unanswered');
    const other = await new Promise<RawExchange>((resolve) => {
      const socket = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' }, () => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
      let received = '';
      socket.setEncoding('utf8').on('data', (c: string) => (received += c));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve({ received, closed: true }));
    });
    assert.match(other.received, /^HTTP\/1\.1 200 /, 'another address is answered');
  });
});

function connectionCount(app: TestApp): Promise<number> {
  return new Promise((resolve, reject) => app.app.server.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
}

describe(`malformed HTTP gets the error envelope (${STORAGE_LABEL})`, () => {
  test('an unknown method, CONNECT, Content-Length with Transfer-Encoding, oversized headers; a method without a route is a 404', async (t) => {
    const app = await startTestApp({ worker: false });
    t.after(() => app.close());
    const account = await app.createAccount();
    const port = await portOf(app);

    assertEnvelope((await rawExchange(port, 'FOO /api/v1/usage HTTP/1.1\r\nHost: x\r\n\r\n')).received, 405, 'method_not_allowed');
    assertEnvelope((await rawExchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')).received, 405, 'method_not_allowed');
    const smuggled = await rawExchange(port, 'POST /api/v1/send HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
    assertEnvelope(smuggled.received, 400, 'invalid_request');
    assert.ok(smuggled.closed, 'a request whose framing is in doubt ends the connection');
    const oversized = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assertEnvelope(oversized.received, 431, 'headers_too_large');
    assertEnvelope((await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n')).received, 400, 'invalid_request');

    const purge = await rawExchange(port, `PURGE /api/v1/usage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${account.testKey}\r\nConnection: close\r\n\r\n`);
    assertEnvelope(purge.received, 404, 'not_found');
  });
});

describe('at the descriptor limit (SQLite, the compiled service)', () => {
  test('with more connections than descriptors the process stays up, and answers again once they are gone', async (t) => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'voicenote-fds-'));
    t.after(() => rm(dataDir, { recursive: true, force: true }));
    // The cap above the descriptor limit on purpose: accept() itself runs out, and every sample of the
    // load-shedding check runs while the process has no descriptor left.
    const env = childEnv({ DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', HTTP_MAX_CONNECTIONS: '5000', LOG_LEVEL: 'info', MAX_EVENT_LOOP_DELAY_MS: '1000' });
    const child = spawn('bash', ['-c', `ulimit -n 256; exec "${process.execPath}" "${BIN}" serve`], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (output += c));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    t.after(() => child.kill('SIGKILL'));
    const port = await new Promise<number>((resolve, reject) => {
      const giveUp = setTimeout(() => reject(new Error(`serve did not start within 60 s (${machineLoad()}): ${output}`)), 60_000);
      const poll = setInterval(() => {
        const found = /"address":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(output);
        if (found || child.exitCode !== null) clearTimeout(giveUp);
        if (found) {
          clearInterval(poll);
          resolve(Number(found[1]));
        } else if (child.exitCode !== null) {
          clearInterval(poll);
          reject(new Error(`serve exited: ${output}`));
        }
      }, 50);
    });

    const sockets: net.Socket[] = [];
    t.after(() => sockets.forEach((s) => s.destroy()));
    for (let i = 0; i < 400; i++) {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.on('connect', () => socket.write('POST /api/v1/send HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{"a":'));
      sockets.push(socket);
    }
    // Three samples of the load-shedding check (one a second) while every descriptor is taken.
    const outcome = await Promise.race([exited.then((code) => `exited with ${code}`), new Promise((r) => setTimeout(() => r('running'), 3_500))]);
    assert.equal(outcome, 'running', output);

    sockets.forEach((s) => s.destroy());
    let answer = '';
    for (let i = 0; i < 200 && !answer.startsWith('HTTP/1.1 200'); i++) {
      answer = (await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 2_000)).received;
      if (!answer.startsWith('HTTP/1.1 200')) await new Promise((r) => setTimeout(r, 50));
    }
    assert.match(answer, /^HTTP\/1\.1 200 /, output);
    assert.equal(child.exitCode, null, 'still running');
  });
});
