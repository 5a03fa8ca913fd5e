import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { startWebhookReceiver, type WebhookReceiver } from './fakes/webhook-receiver.js';
import { closeSharedAudio, connectedSandboxSession, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { createDashboardAccount, FormClient, type DashboardAccount } from './fixtures/dashboard-harness.js';

/**
 * What the dashboard's lists tell: the message list writes platforms as they spell themselves and
 * shows when a scheduled note is due; an endpoint's deliveries say which note each was about.
 */

after(async () => {
  await closeSharedAudio();
});

const rowsOf = (page: string, attribute: string): Map<string, string> =>
  new Map([...page.matchAll(new RegExp(`<tr ${attribute}="([^"]+)"[^>]*>([\\s\\S]*?)</tr>`, 'g'))].map((m) => [m[1]!, m[2]!]));
const cell = (row: string, field: string): string => new RegExp(`data-field="${field}">([\\s\\S]*?)</td>`).exec(row)?.[1] ?? '';

describe(`the dashboard's lists (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let receiver: WebhookReceiver;
  let account: DashboardAccount;
  let client: FormClient;

  before(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestApp({ webhooks: { retryDelaysMs: [20, 20], pollMs: 100 } });
    account = await createDashboardAccount(t);
    client = new FormClient(t);
    assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
  });
  after(() => closeAll(t, receiver));

  it('the message list names platforms LinkedIn, Telegram, WhatsApp and shows when each note is due', async () => {
    const session = await connectedSandboxSession(t, account.testKey);
    const sendAt = new Date(Date.now() + 3 * 3_600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const ids: Record<string, string> = {};
    for (const [platform, extra] of [['whatsapp', {}], ['telegram', { send_at: sendAt }], ['linkedin', {}]] as const) {
      const res = await t.send(account.testKey, { ...defaultSendBody(platform, t.voiceUrl, session), ...extra });
      assert.equal(res.statusCode, 202, res.body);
      ids[platform] = res.json().id;
    }
    const rows = rowsOf((await client.get('/dashboard/messages?env=test')).body, 'data-message-id');
    assert.equal(cell(rows.get(ids.whatsapp!)!, 'platform'), 'WhatsApp');
    assert.equal(cell(rows.get(ids.telegram!)!, 'platform'), 'Telegram');
    assert.equal(cell(rows.get(ids.linkedin!)!, 'platform'), 'LinkedIn');
    assert.match(cell(rows.get(ids.telegram!)!, 'send_at'), new RegExp(sendAt.slice(0, 19).replace('T', ' ')));
    assert.equal(cell(rows.get(ids.whatsapp!)!, 'send_at'), 'at once');
  });

  it("an endpoint's deliveries say which voice note each was about, linked to its page; a test event says it is one", async () => {
    const created = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: account.testKey, body: { url: receiver.url() } });
    assert.equal(created.statusCode, 201, created.body);
    const endpoint = created.json().id as string;
    const sent = await t.send(account.testKey, defaultSendBody('telegram', t.voiceUrl));
    const id = sent.json().id as string;
    await t.waitForStatus(account.testKey, id, ['delivered']);
    assert.equal((await t.request({ method: 'POST', url: `/api/v1/webhook_endpoints/${endpoint}/test`, key: account.testKey })).statusCode, 202);
    let about: string[] = [];
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      const rows = rowsOf((await client.get(`/dashboard/webhooks/${endpoint}`)).body, 'data-delivery-id');
      about = [...rows.values()].map((row) => cell(row, 'about'));
      if (about.some((a) => a.includes(id)) && about.some((a) => a.includes('(test event)'))) break;
    }
    assert.ok(about.includes(`<a href="/dashboard/messages/${id}"><code>${id}</code></a>`), about.join('\n'));
    assert.ok(about.some((a) => /<code>msg_test_event<\/code> \(test event\)/.test(a)), about.join('\n'));
  });
});
