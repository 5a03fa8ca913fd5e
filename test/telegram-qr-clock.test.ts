import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, STORAGE_LABEL } from './fixtures/app-harness.js';
import { FakeTelegram } from './fakes/telegram-mtproto.js';
import { decodeQr, eventually, JANE, telegramApp } from './fixtures/telegram-account.js';

after(closeSharedAudio);

describe(`a Telegram QR code is renewed on Telegram's clock (${STORAGE_LABEL})`, () => {
  it("Telegram's clock 40 s ahead of ours: the login token is renewed when it expires by Telegram's clock, and the code on screen links", async () => {
    const world = new FakeTelegram();
    world.serverClockOffsetMs = 40_000;
    world.tokenTtlSeconds = 4;
    const t = await telegramApp(world, 'one', { worker: false, telegramAccounts: { minRenewMs: 50 } });
    try {
      const account = await t.createAccount();
      const created = (await t.request({ method: 'POST', url: '/api/v1/telegram/sessions', key: account.liveKey })).json();
      const first = decodeQr(created.qr_code);
      const renewed = await eventually(
        async () => {
          const now = (await t.request({ method: 'GET', url: `/api/v1/telegram/sessions/${created.session_id}`, key: account.liveKey })).json();
          return now.qr_code && decodeQr(now.qr_code) !== first ? decodeQr(now.qr_code) : undefined;
        },
        'a renewed login token (timed on the local clock it would come after 44 s)',
        20_000,
      );
      assert.ok(renewed);
      // The code on screen now, scanned (a busy machine may show one that expires as it is read: the next is on screen then).
      await eventually(async () => {
        const now = (await t.request({ method: 'GET', url: `/api/v1/telegram/sessions/${created.session_id}`, key: account.liveKey })).json();
        try {
          world.scan(decodeQr(now.qr_code), JANE);
          return true;
        } catch {
          return undefined;
        }
      }, 'a scannable code on screen');
      await eventually(async () => (await t.request({ method: 'GET', url: `/api/v1/telegram/sessions/${created.session_id}`, key: account.liveKey })).json().status === 'connected', 'the scan to link');
      assert.ok(world.authorizedKeys().length === 1);
    } finally {
      await t.close();
    }
  });
});
