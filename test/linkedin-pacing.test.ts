import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { startLinkedinVoyagerFake, type VoyagerAccount } from './fakes/linkedin-voyager.js';

/**
 * A paced wait gives its worker slot back: a LinkedIn account in its gap between two notes does not
 * hold the worker while another account's note is due. With one worker slot, a note that slept through
 * its account's gap in that slot kept every other account waiting until the busy account's line was through.
 */

const JANE = { publicId: 'jane-smith-a1b2c3', urn: 'urn:li:fsd_profile:ACoAABjaneSmith01' };
// Long enough that the busy account's line lasts well beyond one delivery of the other account.
const PACE = { minMs: 1_500, maxMs: 1_800 };

after(async () => {
  await closeSharedAudio();
});

function newAccount(): VoyagerAccount {
  return {
    liAt: `AQEDAQ${randomBytes(18).toString('base64url')}`,
    csrfToken: `ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}`,
    profileUrn: `urn:li:fsd_profile:ACoAAB${randomBytes(6).toString('hex')}`,
  };
}

describe(`LinkedIn pacing holds no worker slot (${STORAGE_LABEL})`, () => {
  it("one busy li_at does not delay another li_at's note: it goes right after the busy account's first", async () => {
    const fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
    const busy = newAccount();
    const other = newAccount();
    fake.addAccount(busy);
    fake.addAccount(other);
    const t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot, WORKER_CONCURRENCY: '1' }, linkedinPace: PACE });
    try {
      const account = await t.createAccount({ plan: 'growth' });
      const send = async (session: VoyagerAccount): Promise<string> => {
        const body = { ...defaultSendBody('linkedin', t.mp3Url), recipient: JANE.publicId, session: { li_at: session.liAt, csrf_token: session.csrfToken } };
        const res = await t.send(account.liveKey, body);
        assert.equal(res.statusCode, 202, res.body);
        return res.json().id as string;
      };
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push(await send(busy));
      ids.push(await send(other));
      for (const id of ids) {
        const status = await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 60_000);
        assert.equal(status.status, 'delivered', JSON.stringify(status));
      }
      assert.deepEqual(fake.violations, []);
      const order = fake.messages.map((m) => (m.liAt === busy.liAt ? 'busy' : 'other'));
      assert.equal(order.length, 5, `each note sent once: ${order.join(', ')}`);
      // The busy account's second note cannot go before its gap is over; the other account's goes in it.
      assert.ok(order.indexOf('other') <= 1, `the other account's note went before the busy account's second: ${order.join(', ')}`);
      // The busy account still kept its pace, its notes handed back rather than sent early.
      const sends = fake.messages.filter((m) => m.liAt === busy.liAt).map((m) => m.at);
      for (let i = 1; i < sends.length; i++) {
        assert.ok(sends[i]! - sends[i - 1]! >= PACE.minMs, `sends of one li_at ${Math.round(sends[i]! - sends[i - 1]!)} ms apart; pace is at least ${PACE.minMs} ms`);
      }
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
