import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, STORAGE_LABEL } from './fixtures/app-harness.js';
import { FakeTelegram } from './fakes/telegram-mtproto.js';
import { decodeQr, eventually, JANE, telegramApp } from './fixtures/telegram-account.js';

after(closeSharedAudio);

describe(`a Telegram QR code is renewed on Telegram's clock (${STORAGE_LABEL})`, () => {
  it("Telegram's clock 20 s ahead of ours: the login token is renewed when it expires by Telegram's clock, and the renewed code links", async () => {
    const world = new FakeTelegram();
    world.serverClockOffsetMs = 20_000;
    world.tokenTtlSeconds = 2;
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
        'a renewed login token',
        6_000,
      );
      world.scan(renewed, JANE);
      await eventually(async () => (await t.request({ method: 'GET', url: `/api/v1/telegram/sessions/${created.session_id}`, key: account.liveKey })).json().status === 'connected', 'the scan to link');
      assert.ok(world.authorizedKeys().length === 1);
    } finally {
      await t.close();
    }
  });
});
