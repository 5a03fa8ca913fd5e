import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { SendBody } from '../src/api/schemas.js';
import { SEND_FIELDS } from '../src/api/send.js';
import { createKey } from '../src/store/keys.js';
import { BIN, childEnv } from './fixtures/cli-process.js';
import { closeAll } from './fixtures/close-all.js';
import { assertErrorEnvelope, closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { test } from './fixtures/timed.js';

/**
 * The MCP server as an MCP client sees it, through the SDK's own Client: `voicenote mcp` spawned on stdio
 * (the built bin, talking HTTP to a running sandbox service) and POST /mcp on that service.
 */

const TOOL_NAMES = ['cancel_voice_note', 'check_recipient', 'get_usage', 'get_voice_note', 'list_senders', 'list_voice_notes', 'send_voice_note'];
const OTHER_BOT = '987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';

interface ToolAnswer {
  isError?: boolean;
  structuredContent?: any;
  content: Array<{ type: string; text?: string }>;
}

after(async () => {
  await closeSharedAudio();
});

describe(`MCP server, both transports, against a sandbox service (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let base: string;
  let account: TestAccount;
  let readKey: string;

  before(async () => {
    t = await startTestApp({ worker: true, env: { MCP_ENABLED: 'true' } });
    base = await t.listen();
    account = await t.createAccount({ quota: 100 });
    readKey = (await createKey(t.app.services.db.kysely, account.accountId, 'test', Date.now(), { scope: 'read' })).secret;
  });
  after(() => closeAll(t));

  // The built bin with plain node, as a desktop client starts it.
  const stdioTo = (url: string, key: string): Transport =>
    new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp'],
      env: Object.fromEntries(Object.entries(childEnv({ VOICENOTE_URL: url, VOICENOTE_API_KEY: key })).filter((e): e is [string, string] => e[1] !== undefined)),
      stderr: 'pipe',
    });

  const transports: Record<string, (key: string) => Transport> = {
    stdio: (key) => stdioTo(base, key),
    http: (key) => new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }),
  };

  async function connected(transport: Transport): Promise<Client> {
    const client = new Client({ name: 'voicenote-test', version: '1.0.0' });
    await client.connect(transport);
    return client;
  }

  const call = async (client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolAnswer> =>
    (await client.callTool({ name, arguments: args })) as unknown as ToolAnswer;

  const usageSent = async (): Promise<number> => (await t.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).json().usage.total_sent;
  const messageCount = async (): Promise<number> => (await t.request({ method: 'GET', url: '/api/v1/messages?limit=100', key: account.testKey })).json().data.length;

  /** get_voice_note until `done` says so; fails after `timeoutMs`. */
  async function noteUntil(client: Client, id: string, done: (note: any) => boolean, timeoutMs = 60_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const answer = await call(client, 'get_voice_note', { message_id: id });
      assert.ok(!answer.isError, JSON.stringify(answer));
      if (done(answer.structuredContent)) return answer.structuredContent;
      if (Date.now() > deadline) assert.fail(`note ${id} did not get there in ${timeoutMs} ms: ${JSON.stringify(answer.structuredContent)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  const sendArgs = (extra: Record<string, unknown> = {}) => ({ platform: 'telegram', recipient: '123456789', audio_url: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN }, ...extra });

  for (const [name, transportFor] of Object.entries(transports)) {
    describe(name, () => {
      let client: Client;
      before(async () => {
        client = await connected(transportFor(account.testKey));
      });
      after(() => client?.close());

      test('listTools lists the seven tools, each with an object input schema and a description', async () => {
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((tool) => tool.name).sort(), TOOL_NAMES);
        for (const tool of tools) {
          assert.equal(tool.inputSchema.type, 'object', tool.name);
          assert.ok((tool.description ?? '').length > 40, `${tool.name} says what it does`);
        }
        const send = tools.find((tool) => tool.name === 'send_voice_note')!;
        const properties = Object.keys(send.inputSchema.properties ?? {});
        for (const field of ['platform', 'recipient', 'audio_url', 'session', 'caption', 'send_at', 'cancel_on_reply', 'recipient_time_zone', 'dry_run', 'idempotency_key']) {
          assert.ok(properties.includes(field), `send_voice_note takes ${field}`);
        }
        assert.deepEqual(send.inputSchema.required, ['platform', 'recipient', 'audio_url', 'session']);
        assert.deepEqual(tools.find((tool) => tool.name === 'get_voice_note')!.inputSchema.required, ['message_id']);
      });

      test("each tool's input schema is the API's own: every field of POST /send, the query of GET /messages and /senders, the body of /recipients/check", async () => {
        const { tools } = await client.listTools();
        const input = (tool: string) => tools.find((x) => x.name === tool)!.inputSchema as { properties: Record<string, unknown>; required?: string[] };
        const doc = (await t.request({ method: 'GET', url: '/api/v1/openapi.json' })).json();
        // A field added to POST /send is a field of the tool, with the API's own schema (description and all).
        assert.deepEqual(Object.keys(input('send_voice_note').properties).sort(), [...SEND_FIELDS, 'idempotency_key'].sort());
        for (const [field, schema] of Object.entries(SendBody.properties)) {
          // dry_run is the tool's own: its default is true (the API's is false).
          if (field === 'dry_run') continue;
          assert.deepEqual(input('send_voice_note').properties[field], JSON.parse(JSON.stringify(schema)), `send_voice_note.${field} is POST /send's`);
        }
        const queryOf = (path: string) => doc.paths[path].get.parameters.filter((p: any) => p.in === 'query').map((p: any) => p.name).sort();
        assert.deepEqual(Object.keys(input('list_voice_notes').properties).sort(), queryOf('/api/v1/messages'));
        assert.deepEqual(Object.keys(input('list_senders').properties).sort(), queryOf('/api/v1/senders'));
        const checkBody = doc.paths['/api/v1/recipients/check'].post.requestBody.content['application/json'].schema;
        assert.deepEqual(Object.keys(input('check_recipient').properties).sort(), Object.keys(checkBody.properties).sort());
        assert.deepEqual(input('check_recipient').required, checkBody.required);
      });

      test('send_voice_note without dry_run: false checks everything and sends and counts nothing', async () => {
        const [sentBefore, messagesBefore] = [await usageSent(), await messageCount()];
        const answer = await call(client, 'send_voice_note', sendArgs());
        assert.ok(!answer.isError, JSON.stringify(answer));
        assert.equal(answer.structuredContent.dry_run, true);
        assert.equal(answer.structuredContent.would_send, true, JSON.stringify(answer.structuredContent.checks));
        assert.deepEqual(
          answer.structuredContent.checks.map((c: any) => c.id),
          ['validation', 'sender', 'quota', 'daily_rhythm', 'suppression', 'send_window', 'recipient', 'audio'],
        );
        assert.equal(await usageSent(), sentBefore, 'usage unchanged');
        assert.equal(await messageCount(), messagesBefore, 'no message stored');
      });

      test('send_voice_note with dry_run: false delivers, and get_voice_note then shows it delivered', async () => {
        const sentBefore = await usageSent();
        const answer = await call(client, 'send_voice_note', sendArgs({ dry_run: false, idempotency_key: `mcp-${name}-1` }));
        assert.ok(!answer.isError, JSON.stringify(answer));
        assert.match(answer.structuredContent.id, /^msg_/);
        const note = await noteUntil(client, answer.structuredContent.id, (n) => n.status === 'delivered' || n.status === 'failed');
        assert.equal(note.status, 'delivered', JSON.stringify(note));
        assert.equal(await usageSent(), sentBefore + 1, 'one note counted');
        const again = await call(client, 'send_voice_note', sendArgs({ dry_run: false, idempotency_key: `mcp-${name}-1` }));
        assert.equal(again.structuredContent.id, answer.structuredContent.id, 'the idempotency key reaches the API');
        const listed = await call(client, 'list_voice_notes', { status: 'delivered', limit: '100' });
        assert.ok(listed.structuredContent.data.some((m: any) => m.id === answer.structuredContent.id));
      });

      test('a reply in the sandbox (a recipient ending in 6) shows up through get_voice_note', async () => {
        const answer = await call(client, 'send_voice_note', sendArgs({ recipient: '1000006', dry_run: false }));
        assert.ok(!answer.isError, JSON.stringify(answer));
        const note = await noteUntil(client, answer.structuredContent.id, (n) => n.replies.length > 0 || n.status === 'failed');
        assert.equal(note.replies[0].text, 'Thanks, got it!');
      });

      test('tool errors carry the API code and message: an unknown message, a missing argument', async () => {
        const missing = await call(client, 'get_voice_note', { message_id: 'msg_doesnotexist' });
        assert.equal(missing.isError, true);
        assert.equal(missing.structuredContent.error.code, 'not_found');
        assert.match(missing.content[0]!.text!, /^not_found: message msg_doesnotexist not found$/);
        const noId = await call(client, 'cancel_voice_note', {});
        assert.equal(noId.isError, true);
        assert.equal(noId.structuredContent.error.code, 'invalid_request');
        const bad = await call(client, 'send_voice_note', sendArgs({ recipient: 'not a chat' }));
        assert.equal(bad.isError, true);
        assert.equal(bad.structuredContent.error.code, 'invalid_parameter');
        assert.doesNotMatch(JSON.stringify(bad), /at \S+\.(js|ts):\d+|127\.0\.0\.1/, 'no stack, no inside address');
      });

      test('get_usage, list_senders and check_recipient answer with the API views', async () => {
        const usage = await call(client, 'get_usage');
        assert.equal(usage.structuredContent.limits.monthly_quota, 100);
        const senders = await call(client, 'list_senders');
        assert.ok(senders.structuredContent.data.some((s: any) => s.platform === 'telegram'));
        const check = await call(client, 'check_recipient', { platform: 'telegram', recipient: '1000007', session: { bot_token: TELEGRAM_TOKEN } });
        assert.equal(check.structuredContent.exists, false);
      });

      test('a read key can list but not send (insufficient_scope, naming the scope)', async () => {
        const reader = await connected(transportFor(readKey));
        try {
          const listed = await call(reader, 'list_voice_notes');
          assert.ok(!listed.isError, JSON.stringify(listed));
          for (const dryRun of [true, false]) {
            const refused = await call(reader, 'send_voice_note', sendArgs({ dry_run: dryRun }));
            assert.equal(refused.isError, true);
            assert.equal(refused.structuredContent.error.code, 'insufficient_scope');
            assert.equal(refused.structuredContent.error.details.scope, 'read');
          }
        } finally {
          await reader.close();
        }
      });

      test('a key limited to one sender cannot send from another (sender_not_allowed)', async () => {
        const senders = (await t.request({ method: 'GET', url: '/api/v1/senders', key: account.testKey })).json().data;
        const bot = senders.find((s: any) => s.kind === 'telegram_bot');
        const limited = (await createKey(t.app.services.db.kysely, account.accountId, 'test', Date.now(), { scope: 'send', senders: [bot.id] })).secret;
        const sender = await connected(transportFor(limited));
        try {
          const own = await call(sender, 'send_voice_note', sendArgs());
          assert.ok(!own.isError, JSON.stringify(own));
          assert.equal(own.structuredContent.message.sender_id, bot.id);
          const other = await call(sender, 'send_voice_note', sendArgs({ session: { bot_token: OTHER_BOT }, dry_run: false }));
          assert.equal(other.isError, true);
          assert.equal(other.structuredContent.error.code, 'sender_not_allowed');
          assert.equal(other.structuredContent.error.details.scope, 'send');
          assert.deepEqual(other.structuredContent.error.details.senders, [bot.id]);
        } finally {
          await sender.close();
        }
      });
    });
  }

  test('stdio: a service that cannot be reached is a tool error service_unavailable, its address not shown to the model', async () => {
    // A loopback port that was just free: nothing answers there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise((resolve) => probe.close(resolve));
    const client = await connected(stdioTo(`http://127.0.0.1:${port}`, account.testKey));
    try {
      const answer = await call(client, 'get_usage');
      assert.equal(answer.isError, true);
      assert.equal(answer.structuredContent.error.code, 'service_unavailable');
      assert.doesNotMatch(JSON.stringify(answer), new RegExp(`127\\.0\\.0\\.1|${port}|at \\S+\\.(js|ts):\\d+`), 'no address, no stack');
    } finally {
      await client.close();
    }
  });

  test("send_voice_note over /mcp spends the key's send rate limit as POST /send does, dry runs too: past it, rate_limited", async () => {
    const limited = await t.createAccount({ rateLimit: 3 });
    const client = await connected(transports.http!(limited.testKey));
    try {
      const outcomes: string[] = [];
      for (let i = 0; i < 6; i++) {
        try {
          const answer = await call(client, 'send_voice_note', sendArgs());
          outcomes.push(answer.isError ? String(answer.structuredContent?.error?.code) : 'checked');
        } catch (error) {
          outcomes.push(/429[\s\S]*rate_limited/.test(String(error)) ? 'rate_limited' : String(error));
        }
      }
      // Three a minute: three dry runs, then refusals, the API's own error.
      assert.deepEqual(outcomes, ['checked', 'checked', 'checked', 'rate_limited', 'rate_limited', 'rate_limited']);
      // One budget with the API: the key's POST /send is refused too.
      assertErrorEnvelope(await t.send(limited.testKey, { ...sendArgs(), dry_run: true }), 429, 'rate_limited');
    } finally {
      await client.close().catch(() => undefined);
    }
  });

  test('POST /mcp without a key is 401 in the error envelope; with one it carries the rate-limit headers', async () => {
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const anonymous = await t.request({ method: 'POST', url: '/mcp', body: initialize, headers });
    assertErrorEnvelope(anonymous, 401, 'unauthorized');
    const res = await fetch(`${base}/mcp`, { method: 'POST', headers: { ...headers, authorization: `Bearer ${account.testKey}` }, body: JSON.stringify(initialize) });
    assert.equal(res.status, 200);
    assert.ok(res.headers.get('x-ratelimit-limit'), 'drawn from the rate limit like any API request');
    assert.equal(((await res.json()) as any).result.serverInfo.name, 'voicenote');
  });
});

describe(`POST /mcp is off unless MCP_ENABLED=true (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ worker: false });
  });
  after(() => closeAll(t));

  test('404 not_found, with a key or without', async () => {
    const account = await t.createAccount();
    const body = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
    assertErrorEnvelope(await t.request({ method: 'POST', url: '/mcp', key: account.testKey, body }), 404, 'not_found');
    assertErrorEnvelope(await t.request({ method: 'POST', url: '/mcp', body }), 404, 'not_found');
  });
});
