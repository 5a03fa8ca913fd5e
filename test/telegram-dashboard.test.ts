import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { closeSharedAudio, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { createDashboardAccount, csrfIn, FormClient, type DashboardAccount } from './fixtures/dashboard-harness.js';

describe(`dashboard: Telegram accounts (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: DashboardAccount;
  before(async () => {
    t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    account = await createDashboardAccount(t);
  });
  after(async () => {
    await t.close();
    await closeSharedAudio();
  });

  it('links an account (the QR code shown and followed), lists it live, and deletes it', async () => {
    const client = new FormClient(t, '10.9.0.2');
    assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
    const empty = await client.get('/dashboard/telegram');
    assert.equal(empty.statusCode, 200);
    assert.match(empty.body, /No Telegram accounts in this environment yet/);
    assert.match(empty.body, /href="\/dashboard\/telegram"/, 'in the navigation');

    const created = await client.post('/dashboard/telegram', { _csrf: csrfIn(empty.body) });
    assert.equal(created.statusCode, 201);
    const id = /data-session="(ts_[0-9A-Za-z]{24})"/.exec(created.body)![1]!;
    assert.match(created.body, /<img class="qr" data-qr src="data:image\/png;base64,/);
    assert.match(created.body, new RegExp(`data-row-poll="/dashboard/telegram/${id}/status"`));

    const status = await client.get(`/dashboard/telegram/${id}/status`);
    assert.equal(status.statusCode, 200);
    assert.equal(status.json().status, 'qr_pending');
    assert.match(status.json().qr_code, /^data:image\/png;base64,/, 'the code to show now');

    await t.request({ method: 'POST', url: `/api/v1/telegram/sessions/${id}/simulate`, key: account.testKey, body: { event: 'scan' } });
    const linked = (await client.get(`/dashboard/telegram/${id}/status`)).json();
    assert.equal(linked.status, 'connected');
    assert.equal(linked.qr_code, undefined);
    assert.match((await client.get('/dashboard/telegram')).body, /@voicenote_sandbox/);

    const page = await client.get('/dashboard/telegram');
    const deleted = await client.post(`/dashboard/telegram/${id}/delete`, { _csrf: csrfIn(page.body) });
    assert.equal(deleted.statusCode, 303);
    assert.match(String(deleted.headers.location), /notice=deleted/);
    assert.equal((await client.get(`/dashboard/telegram/${id}/status`)).statusCode, 404);
    assert.deepEqual((await t.request({ method: 'GET', url: '/api/v1/telegram/sessions', key: account.testKey })).json(), { sessions: [] });
  });
});
