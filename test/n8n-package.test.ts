import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { N8N_PACKAGE_DIR, n8nPackageUnavailable } from './fixtures/n8n-package.js';
import { SEND_FIELDS } from '../src/api/send.js';
import { WEBHOOK_EVENT_TYPES } from '../src/store/webhook-outbox.js';
import { webhookHeaders } from '../src/webhooks/signing.js';

/*
 * The n8n community-node package (clients/n8n) without n8n: it builds with tsc, passes n8n's own
 * community-node lint rules, declares itself to n8n as n8n documents it, and its compiled nodes load
 * with the descriptions n8n reads. test/n8n-real.test.ts runs it inside a real n8n.
 */

const run = promisify(execFile);
const unavailable = n8nPackageUnavailable();
const requireFromPackage = createRequire(path.join(N8N_PACKAGE_DIR, 'package.json'));

interface PackageJson {
  name: string;
  keywords: string[];
  dependencies?: Record<string, string>;
  n8n: { n8nNodesApiVersion: number; credentials: string[]; nodes: string[] };
}

describe('the n8n package n8n-nodes-voicenote', { skip: unavailable ?? false }, () => {
  let pkg: PackageJson;
  before(async () => {
    await run('npm', ['run', 'build'], { cwd: N8N_PACKAGE_DIR, timeout: 300_000 });
    pkg = JSON.parse(await readFile(path.join(N8N_PACKAGE_DIR, 'package.json'), 'utf8')) as PackageJson;
  });

  test("passes n8n's node CLI lint in strict mode (n8n-node lint)", async () => {
    // What `npm run lint` runs: n8n's own rules for community nodes (@n8n/node-cli/eslint), offline. It
    // exits non-zero on an error, and on an eslint.config.mjs other than its template (strict mode).
    const cli = path.join(N8N_PACKAGE_DIR, 'node_modules', '.bin', 'n8n-node');
    const { stdout, stderr } = await run(cli, ['lint'], { cwd: N8N_PACKAGE_DIR, timeout: 300_000 });
    const text = `${stdout}${stderr}`.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
    assert.doesNotMatch(text, /Strict mode violation/, text);
    const problems = text.split('\n').filter((line) => /^\s+\d+:\d+\s+(error|warning)\s/.test(line));
    // The one warning left: package.json has no "homepage" until the package has a public address.
    assert.deepEqual(problems.filter((line) => !line.includes('require-homepage')), [], text);
  });

  test('declares itself as n8n finds community nodes', () => {
    assert.equal(pkg.name, 'n8n-nodes-voicenote');
    assert.ok(pkg.keywords.includes('n8n-community-node-package'));
    assert.equal(pkg.n8n.n8nNodesApiVersion, 1);
    assert.equal(pkg.dependencies, undefined, 'no runtime dependencies: n8n gives n8n-workflow');
    for (const file of [...pkg.n8n.credentials, ...pkg.n8n.nodes]) assert.ok(existsSync(path.join(N8N_PACKAGE_DIR, file)), `${file} is built`);
  });

  test('its compiled nodes load with their descriptions, icons and credential', () => {
    const [credentialsFile] = pkg.n8n.credentials;
    const { VoicenoteApi } = requireFromPackage(`./${credentialsFile}`);
    const credential = new VoicenoteApi();
    assert.equal(credential.name, 'voicenoteApi');
    assert.equal(credential.displayName, 'Voicenote API');
    assert.equal(credential.test.request.url, '/api/v1/usage');
    assert.deepEqual(credential.properties.map((p: { name: string }) => p.name), ['url', 'apiKey']);
    assert.equal(credential.properties[1].typeOptions.password, true, 'the key is a password field');

    const nodes = pkg.n8n.nodes.map((file) => {
      const exported = requireFromPackage(`./${file}`);
      const NodeClass = Object.values(exported)[0] as new () => { description: any; webhookMethods?: unknown };
      return { file, node: new NodeClass() };
    });
    assert.deepEqual(nodes.map(({ node }) => node.description.name), ['voicenote', 'voicenoteTrigger']);
    for (const { file, node } of nodes) {
      assert.deepEqual(node.description.credentials, [{ name: 'voicenoteApi', required: true }]);
      for (const icon of Object.values(node.description.icon as Record<string, string>)) {
        assert.ok(existsSync(path.join(N8N_PACKAGE_DIR, path.dirname(file), icon.replace(/^file:/, ''))), `${icon} is beside ${file}`);
      }
    }

    const [voicenote, trigger] = nodes.map(({ node }) => node.description);
    const options = (name: string, shownFor: string) =>
      voicenote.properties
        .filter((p: any) => p.name === name && (p.displayOptions?.show?.resource ?? []).includes(shownFor))
        .flatMap((p: any) => p.options.map((o: { value: string }) => o.value));
    assert.deepEqual(voicenote.properties.find((p: any) => p.name === 'resource').options.map((o: any) => o.value), ['recipient', 'sender', 'suppression', 'usage', 'voiceNote']);
    assert.deepEqual(options('operation', 'voiceNote'), ['cancel', 'get', 'getAll', 'send']);
    assert.deepEqual(options('operation', 'sender'), ['get', 'getAll']);
    assert.deepEqual(options('operation', 'recipient'), ['check']);
    assert.deepEqual(options('operation', 'usage'), ['get']);
    assert.deepEqual(options('operation', 'suppression'), ['add', 'delete', 'getAll']);

    // Send offers every field POST /send takes (a field added to the API must be added here too), and
    // the entered session's proxy.
    const sendParameters = voicenote.properties.filter((p: any) => {
      const show = p.displayOptions?.show;
      return show?.resource?.includes('voiceNote') && show?.operation?.includes('send');
    });
    const offered = new Set<string>(sendParameters.flatMap((p: any) => [p.name, ...(p.options ?? []).map((o: { name: string }) => o.name)]));
    const parameterFor = (field: string) => (field === 'session' ? 'sender' : field.replace(/_([a-z])/g, (_: string, c: string) => c.toUpperCase()));
    for (const field of SEND_FIELDS) assert.ok(offered.has(parameterFor(field)), `Send offers ${field} (as ${parameterFor(field)})`);
    assert.ok(offered.has('proxy'), "Send offers the entered session's proxy");

    assert.deepEqual(trigger.webhooks.map((w: any) => [w.name, w.httpMethod]), [['default', 'POST']]);
    const events = trigger.properties.find((p: any) => p.name === 'events').options.map((o: { value: string }) => o.value);
    // Exactly the events an endpoint can subscribe to: a new one is offered here too.
    assert.deepEqual([...events].sort(), [...WEBHOOK_EVENT_TYPES].sort());
  });
});

describe("the package's README", () => {
  test('shows the example workflow that is in examples/, and every parameter it sets is one the node has', async () => {
    const readme = await readFile(path.join(N8N_PACKAGE_DIR, 'README.md'), 'utf8');
    const block = /```json\n([\s\S]*?)\n```/.exec(readme)?.[1];
    assert.ok(block, 'a JSON block in the README');
    const example = JSON.parse(await readFile(path.join(N8N_PACKAGE_DIR, 'examples', 'new-row-send-wait-for-reply.json'), 'utf8'));
    assert.deepEqual(JSON.parse(block), example);
    const types = example.nodes.map((node: { type: string }) => node.type);
    assert.ok(types.includes('n8n-nodes-voicenote.voicenote') && types.includes('n8n-nodes-voicenote.voicenoteTrigger'));
    assert.ok(example.nodes.some((node: { parameters: { events?: string[] } }) => node.parameters.events?.includes('voice_note.replied')));
  });
});

/** The compiled check the trigger runs on each delivery (clients/n8n/shared/signature.ts). */
type SignatureProblem = (secret: string, delivery: { id?: string; timestamp?: string; signature?: string; body: string }, nowSeconds?: number) => string | null;

describe("the trigger's signature check", { skip: unavailable ?? false }, () => {
  let signatureProblem: SignatureProblem;
  before(async () => {
    if (!existsSync(path.join(N8N_PACKAGE_DIR, 'dist', 'shared', 'signature.js'))) await run('npm', ['run', 'build'], { cwd: N8N_PACKAGE_DIR, timeout: 300_000 });
    signatureProblem = requireFromPackage('./dist/shared/signature.js').signatureProblem as SignatureProblem;
  });

  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const body = JSON.stringify({ type: 'voice_note.replied', timestamp: '2026-11-28T18:00:00.000Z', data: { id: 'msg_1' } });
  const now = 1_795_000_000;
  const delivery = (headers: Record<string, string>, text = body) => ({
    id: headers['webhook-id'],
    timestamp: headers['webhook-timestamp'],
    signature: headers['webhook-signature'],
    body: text,
  });

  test("verifies the service's own signature, and the old secret's beside it after a roll", () => {
    assert.equal(signatureProblem(secret, delivery(webhookHeaders([secret], 'evt_1', now, body)), now), null);
    const rolled = webhookHeaders(['whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=', secret], 'evt_1', now, body);
    assert.equal(signatureProblem(secret, delivery(rolled), now), null);
  });

  test('refuses a forged, altered, stale or unsigned delivery', () => {
    const signed = webhookHeaders([secret], 'evt_1', now, body);
    assert.equal(signatureProblem(secret, delivery(webhookHeaders(['whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='], 'evt_1', now, body)), now), 'no signature matches');
    assert.equal(signatureProblem(secret, delivery(signed, body.replace('msg_1', 'msg_2')), now), 'no signature matches');
    assert.equal(signatureProblem(secret, delivery({ ...signed, 'webhook-id': 'evt_2' }), now), 'no signature matches');
    assert.equal(signatureProblem(secret, delivery(signed), now + 301), 'webhook-timestamp is too far from now');
    assert.equal(signatureProblem(secret, delivery(webhookHeaders([secret], 'evt_1', now - 301, body)), now), 'webhook-timestamp is too far from now');
    assert.match(signatureProblem(secret, delivery({ ...signed, 'webhook-signature': '' }), now) ?? '', /missing/);
  });
});
