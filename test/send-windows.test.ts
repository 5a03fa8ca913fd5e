/**
 * Send windows (docs/sending.md, "Send windows"): the rhythm over HTTP, a note accepted outside its
 * account's window waiting for the opening (across a daylight-saving change, in a recipient's zone too),
 * and the rules of a window in local hours. Time passes on a test clock: the windows' clock moves, and
 * the queue's due times (on the database's clock) move back by as much, as if the database's time had
 * passed; nothing waits for real.
 */
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { nextOpening, parseWindowText, WEEKDAYS, windowProblem, type SendWindow } from '../src/core/send-window.js';
import { readSendCsv, sendBody } from '../src/cli/send.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestAccount, type TestApp } from './fixtures/app-harness.js';

after(closeSharedAudio);

const HOUR = 60 * 60_000;
const BERLIN_OFFICE: SendWindow = { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '18:00', time_zone: 'Europe/Berlin' };
const at = (iso: string): number => Date.parse(iso);
const isoOf = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

describe('a window in local hours', () => {
  it('opens at 09:00 Berlin time on the Monday after clocks go forward (07:00 UTC, not 08:00)', () => {
    // Saturday 28 March 2026, 13:00 in Berlin; summer time starts on Sunday the 29th.
    assert.equal(isoOf(nextOpening(BERLIN_OFFICE, null, at('2026-03-28T12:00:00Z'))), '2026-03-30T07:00:00.000Z');
    // The Friday before, at 17:00 UTC (18:00 in Berlin): closed, opening on Monday.
    assert.equal(isoOf(nextOpening(BERLIN_OFFICE, null, at('2026-03-27T17:00:00Z'))), '2026-03-30T07:00:00.000Z');
  });

  it('opens at 09:00 Berlin time on the Monday after clocks go back (08:00 UTC, not 07:00)', () => {
    // Friday 23 October 2026, 19:00 in Berlin; winter time starts on Sunday the 25th.
    assert.equal(isoOf(nextOpening(BERLIN_OFFICE, null, at('2026-10-23T17:00:00Z'))), '2026-10-26T08:00:00.000Z');
    // Monday 07:30 UTC is 08:30 in Berlin now: still closed.
    assert.equal(isoOf(nextOpening(BERLIN_OFFICE, null, at('2026-10-26T07:30:00Z'))), '2026-10-26T08:00:00.000Z');
  });

  it('is open at once inside the window, and closes at its end', () => {
    const wednesday = at('2026-06-10T10:00:00Z'); // 12:00 in Berlin
    assert.equal(nextOpening(BERLIN_OFFICE, null, wednesday), wednesday);
    // 18:00 in Berlin is the end: closed from then until Thursday 09:00.
    assert.equal(isoOf(nextOpening(BERLIN_OFFICE, null, at('2026-06-10T16:00:00Z'))), '2026-06-11T07:00:00.000Z');
  });

  it("with a recipient's zone, goes only while both are open; null when they never overlap", () => {
    // New York's 09:00 is 15:00 in Berlin (both on summer time on 30 March 2026): the later opening wins.
    assert.equal(isoOf(nextOpening(BERLIN_OFFICE, 'America/New_York', at('2026-03-28T12:00:00Z'))), '2026-03-30T13:00:00.000Z');
    // Berlin's 09:00–18:00 and Auckland's 09:00–18:00 never meet.
    assert.equal(nextOpening(BERLIN_OFFICE, 'Pacific/Auckland', at('2026-03-28T12:00:00Z')), null);
  });

  it('runs past midnight: "sat 22:00-06:00" is Saturday night until Sunday 06:00, in local hours across a change of clocks', () => {
    const saturdayNight: SendWindow = { days: ['sat'], start: '22:00', end: '06:00', time_zone: 'Europe/Berlin' };
    // Saturday 28 March 2026, 22:00 in Berlin is 21:00 UTC (winter time)…
    assert.equal(isoOf(nextOpening(saturdayNight, null, at('2026-03-28T12:00:00Z'))), '2026-03-28T21:00:00.000Z');
    // …and it closes at 06:00 on Sunday, summer time by then: 04:00 UTC (a night an hour shorter).
    const late = at('2026-03-29T03:59:00Z');
    assert.equal(nextOpening(saturdayNight, null, late), late, 'open at 05:59 Berlin time');
    assert.equal(isoOf(nextOpening(saturdayNight, null, at('2026-03-29T04:00:00Z'))), '2026-04-04T20:00:00.000Z', 'closed at 06:00; next Saturday 22:00 (summer time)');
    // Clocks go back on Sunday 25 October 2026: opens 22:00 summer time (20:00 UTC), closes 06:00 winter time (05:00 UTC).
    const daily: SendWindow = { ...saturdayNight, days: [...WEEKDAYS] };
    const longNight = at('2026-10-25T04:30:00Z');
    assert.equal(nextOpening(daily, null, longNight), longNight, 'open at 05:30 Berlin time, after the hour shown twice');
    assert.equal(isoOf(nextOpening(daily, null, at('2026-10-25T05:00:00Z'))), '2026-10-25T21:00:00.000Z', 'closed at 06:00; opens at 22:00 winter time');
    // The day named is the day it opens: open on Sunday 00:30 because Saturday is listed, not Sunday.
    const sundayEarly = at('2026-06-13T22:30:00Z'); // Sunday 14 June, 00:30 in Berlin
    assert.equal(nextOpening(saturdayNight, null, sundayEarly), sundayEarly);
  });

  it("past midnight with a recipient's zone: goes only while both nights overlap; null when they never do", () => {
    const weeknights: SendWindow = { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '22:00', end: '06:00', time_zone: 'Europe/Berlin' };
    // Monday night in Berlin is 20:00–04:00 UTC, in New York 02:00–10:00 UTC (both on summer time): 02:00–04:00 UTC on Tuesday.
    assert.equal(isoOf(nextOpening(weeknights, 'America/New_York', at('2026-03-28T12:00:00Z'))), '2026-03-31T02:00:00.000Z');
    const both = at('2026-03-31T03:00:00Z');
    assert.equal(nextOpening(weeknights, 'America/New_York', both), both);
    assert.equal(isoOf(nextOpening(weeknights, 'America/New_York', at('2026-03-31T04:00:00Z'))), '2026-04-01T02:00:00.000Z');
    // Auckland's nights (09:00–17:00 UTC) never meet Berlin's.
    assert.equal(nextOpening(weeknights, 'Pacific/Auckland', at('2026-03-28T12:00:00Z')), null);
  });

  it('reads the CLI\'s text and names what is wrong', () => {
    assert.deepEqual(parseWindowText('mon-fri 09:00-18:00 Europe/Berlin'), BERLIN_OFFICE);
    assert.deepEqual(parseWindowText('sat,sun 10:00-14:00 UTC'), { days: ['sat', 'sun'], start: '10:00', end: '14:00', time_zone: 'UTC' });
    assert.match(String(parseWindowText('mon-fri 09:00-18:00 Mars/Olympus')), /time_zone must be an IANA time zone/);
    assert.deepEqual(parseWindowText('fri 22:00-06:00 UTC'), { days: ['fri'], start: '22:00', end: '06:00', time_zone: 'UTC' });
    assert.match(String(parseWindowText('mon-fri 09:00-09:00 UTC')), /end must differ from start/);
    assert.match(String(parseWindowText('weekdays 09:00-18:00 UTC')), /days must be/);
    assert.equal(windowProblem({ ...BERLIN_OFFICE, start: '9am' })?.field, 'send_window.start');
  });
});

it("a CSV's recipient_time_zone column goes with its row's send; an empty cell sends none", () => {
  const [newYork, none] = readSendCsv('platform,recipient,audio_url,bot_token,recipient_time_zone\ntelegram,1,https://a/x.ogg,1:t,America/New_York\ntelegram,2,https://a/x.ogg,1:t,\n');
  assert.equal(sendBody(newYork!.fields).recipient_time_zone, 'America/New_York');
  assert.equal('recipient_time_zone' in sendBody(none!.fields), false);
});

describe(`the rhythm over HTTP (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;

  before(async () => {
    t = await startTestApp({ worker: false });
    account = await t.createAccount();
  });
  after(() => closeAll(t));

  const rhythm = (key: string) => t.request({ method: 'GET', url: '/api/v1/rhythm', key });
  const patch = (key: string, platform: string, body: unknown) => t.request({ method: 'PATCH', url: `/api/v1/rhythm/${platform}`, key, body });

  it('lists every platform with its daily cap, warm-up and send window (none by default)', async () => {
    const res = await rhythm(account.testKey);
    assert.equal(res.statusCode, 200, res.body);
    const { data } = res.json<{ data: Array<Record<string, unknown>> }>();
    assert.deepEqual(data.map((r) => r.platform).sort(), ['linkedin', 'telegram', 'whatsapp']);
    for (const item of data) {
      assert.deepEqual(Object.keys(item).sort(), ['daily_cap', 'platform', 'send_window', 'warmup']);
      assert.equal(item.send_window, null);
    }
  });

  it('sets a send window, a daily cap and a warm-up, each on its own, and takes the window away with null', async () => {
    const set = await patch(account.testKey, 'whatsapp', { send_window: { days: ['fri', 'mon'], start: '08:30', end: '17:00', time_zone: 'America/Sao_Paulo' } });
    assert.equal(set.statusCode, 200, set.body);
    assert.deepEqual(set.json().send_window, { days: ['mon', 'fri'], start: '08:30', end: '17:00', time_zone: 'America/Sao_Paulo' });
    const capped = await patch(account.liveKey, 'whatsapp', { daily_cap: 40, warmup: { start: 10, days: 5 } });
    assert.equal(capped.statusCode, 200, capped.body);
    assert.deepEqual(capped.json(), {
      platform: 'whatsapp',
      daily_cap: 40,
      warmup: { start: 10, days: 5 },
      send_window: { days: ['mon', 'fri'], start: '08:30', end: '17:00', time_zone: 'America/Sao_Paulo' },
    });
    const listed = (await rhythm(account.testKey)).json<{ data: Array<Record<string, unknown>> }>().data.find((r) => r.platform === 'whatsapp');
    assert.deepEqual(listed, capped.json());
    const cleared = await patch(account.testKey, 'whatsapp', { send_window: null, daily_cap: null });
    assert.equal(cleared.statusCode, 200, cleared.body);
    assert.deepEqual(cleared.json(), { platform: 'whatsapp', daily_cap: null, warmup: null, send_window: null });
  });

  it('refuses a bad window or rhythm with 422 naming the field, an unknown field with 400, an unknown platform with 404', async () => {
    const window = { days: ['mon'], start: '09:00', end: '18:00', time_zone: 'Europe/Berlin' };
    const cases: Array<[unknown, string]> = [
      [{ send_window: { ...window, time_zone: 'Europe/Atlantis' } }, 'send_window.time_zone'],
      [{ send_window: { ...window, time_zone: '+02:00' } }, 'send_window.time_zone'],
      [{ send_window: { ...window, days: ['monday'] } }, 'send_window.days'],
      [{ send_window: { ...window, days: [] } }, 'send_window.days'],
      [{ send_window: { ...window, start: '25:00' } }, 'send_window.start'],
      [{ send_window: { ...window, end: '09:00' } }, 'send_window.end'],
      [{ send_window: { ...window, end: '24:01' } }, 'send_window.end'],
      [{ send_window: { ...window, time_zone: undefined } }, 'send_window.time_zone'],
      [{ send_window: 'mon-fri 09:00-18:00 Europe/Berlin' }, 'send_window'],
      [{ daily_cap: 0 }, 'daily_cap'],
      [{ daily_cap: 'ten' }, 'daily_cap'],
      [{ warmup: { start: 5, days: 0 } }, 'warmup.days'],
    ];
    for (const [body, field] of cases) {
      const error = assertErrorEnvelope(await patch(account.testKey, 'telegram', body), 422, 'invalid_parameter');
      assert.equal(error.details.field, field, JSON.stringify(body));
    }
    const unknown = assertErrorEnvelope(await patch(account.testKey, 'telegram', { sendWindow: null }), 400, 'invalid_request');
    assert.match(unknown.message, /sendWindow/);
    assertErrorEnvelope(await patch(account.testKey, 'fax', { send_window: null }), 404, 'not_found');
    // Nothing was changed by any of them.
    const telegram = (await rhythm(account.testKey)).json<{ data: Array<Record<string, unknown>> }>().data.find((r) => r.platform === 'telegram');
    assert.equal(telegram?.send_window, null);
  });

  it("refuses a recipient_time_zone that is no IANA zone, or whose hours never meet the window's: 422 naming it", async () => {
    const send = (extra: Record<string, unknown>) => t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), ...extra });
    for (const value of ['Mars/Olympus', 'GMT+2 ', 5, { zone: 'UTC' }]) {
      const error = assertErrorEnvelope(await send({ recipient_time_zone: value }), 422, 'invalid_parameter');
      assert.equal(error.details.field, 'recipient_time_zone', JSON.stringify(value));
    }
    assert.equal((await patch(account.testKey, 'telegram', { send_window: { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '18:00', time_zone: 'Europe/Berlin' } })).statusCode, 200);
    const never = assertErrorEnvelope(await send({ recipient_time_zone: 'Pacific/Auckland' }), 422, 'invalid_parameter');
    assert.equal(never.details.field, 'recipient_time_zone');
    assert.match(never.message, /never open at the same time in Pacific\/Auckland/);
    const usage = (await t.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).json();
    assert.equal(usage.usage.total_sent, 0, 'a refused send is not counted');
  });
});

describe(`notes outside their send window wait for it, in the sandbox (${STORAGE_LABEL})`, () => {
  // The windows' clock: the real one moved to Saturday 28 March 2026, 12:00 UTC (13:00 in Berlin), the
  // day before Berlin's clocks go forward.
  let offset = at('2026-03-28T12:00:00Z') - Date.now();
  const now = (): number => Date.now() + offset;
  let t: TestApp;
  let windowed: TestAccount;
  let other: TestAccount;

  before(async () => {
    t = await startTestApp({ now, workerPollMs: 50 });
    windowed = await t.createAccount();
    other = await t.createAccount();
    const res = await t.request({ method: 'PATCH', url: '/api/v1/rhythm/telegram', key: windowed.testKey, body: { send_window: BERLIN_OFFICE } });
    assert.equal(res.statusCode, 200, res.body);
  });
  after(() => closeAll(t));

  /** Time passes: the windows' clock moves on, and every queued note's due time comes that much nearer. */
  async function pass(ms: number): Promise<void> {
    offset += ms;
    await t.app.services.db.kysely
      .updateTable('messages')
      .set((eb) => ({ next_attempt_at: eb('next_attempt_at', '-', ms) }))
      .where('status', '=', 'queued')
      .execute();
  }
  const passUntil = (iso: string) => pass(at(iso) - now());
  /** A time GET /status shows, read on the windows' clock. */
  const onTestClock = (shown: string): number => Date.parse(shown) + offset;
  const status = async (id: string, key = windowed.testKey) => (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key })).json();
  const send = async (key: string, extra: Record<string, unknown> = {}): Promise<string> => {
    const res = await t.send(key, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '4915112345678', ...extra });
    assert.equal(res.statusCode, 202, res.body);
    return res.json<{ id: string }>().id;
  };
  /**
   * Due at the opening: never before it, and after it by at most `lateMs` (a wait the worker writes
   * counts from the moment it is written, a little after it weighed the window on a busy machine).
   */
  const dueAt = (shown: Record<string, unknown>, iso: string, lateMs: number): boolean => {
    const due = onTestClock(String(shown.next_attempt_at));
    return due > at(iso) - 1_000 && due < at(iso) + lateMs;
  };
  const assertWaitsUntil = (shown: Record<string, unknown>, iso: string, lateMs = 1_000) => {
    assert.equal(shown.status, 'queued');
    assert.equal(shown.waiting_for, 'send_window');
    assert.ok(dueAt(shown, iso, lateMs), `due at ${iso}, shown ${isoOf(onTestClock(String(shown.next_attempt_at)))} on the test clock`);
  };

  it("waits over a weekend and a change to summer time, in its recipient's zone too; another account's window never applies", async () => {
    const berlin = await send(windowed.testKey);
    const newYork = await send(windowed.testKey, { recipient_time_zone: 'America/New_York' });
    // Scheduled for an hour from now (Saturday, closed): it waits for the opening too.
    const scheduled = await send(windowed.testKey, { send_at: new Date(Date.now() + HOUR).toISOString() });
    const unwindowed = await send(other.testKey);

    assert.equal((await t.waitForStatus(other.testKey, unwindowed, ['delivered', 'failed'])).status, 'delivered', 'no window of its own: it goes at once');
    // Monday 09:00 in Berlin is 07:00 UTC on summer time; in New York 09:00 is 13:00 UTC.
    assertWaitsUntil(await status(berlin), '2026-03-30T07:00:00Z');
    assertWaitsUntil(await status(newYork), '2026-03-30T13:00:00Z');
    assertWaitsUntil(await status(scheduled), '2026-03-30T07:00:00Z');

    // Monday, 08:59 in Berlin: still waiting.
    await passUntil('2026-03-30T06:59:00Z');
    assertWaitsUntil(await status(berlin), '2026-03-30T07:00:00Z');
    // The window opens: the two Berlin notes go; the New York one waits for its recipient's morning.
    await passUntil('2026-03-30T07:00:05Z');
    assert.equal((await t.waitForStatus(windowed.testKey, berlin, ['delivered', 'failed'])).status, 'delivered');
    assert.equal((await t.waitForStatus(windowed.testKey, scheduled, ['delivered', 'failed'])).status, 'delivered');
    assertWaitsUntil(await status(newYork), '2026-03-30T13:00:00Z');

    // The window moves to 10:00: the waiting note is weighed again at once (the worker finds it closed
    // in New York until 10:00 there, 14:00 UTC).
    const moved = await t.request({ method: 'PATCH', url: '/api/v1/rhythm/telegram', key: windowed.testKey, body: { send_window: { ...BERLIN_OFFICE, start: '10:00' } } });
    assert.equal(moved.statusCode, 200, moved.body);
    const deadline = Date.now() + 60_000;
    let shown = await status(newYork);
    while (!(shown.status === 'queued' && dueAt(shown, '2026-03-30T14:00:00Z', 60_000)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      shown = await status(newYork);
    }
    assertWaitsUntil(shown, '2026-03-30T14:00:00Z', 60_000);
    await passUntil('2026-03-30T14:00:05Z');
    assert.equal((await t.waitForStatus(windowed.testKey, newYork, ['delivered', 'failed'])).status, 'delivered');
  });

  it('a note accepted while its window is open goes at once, and GET /status keeps its exact fields', async () => {
    // Monday 16:00 in Berlin (the test above left the clock at 14:00 UTC): open in Berlin.
    const id = await send(windowed.testKey);
    const delivered = await t.waitForStatus(windowed.testKey, id, ['delivered', 'failed']);
    assert.equal(delivered.status, 'delivered');
    assert.deepEqual(Object.keys(delivered).sort(), ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status']);
  });

  it('a window past midnight: accepted in the afternoon, a note waits for 22:00 and goes in the night; after 06:00 one waits for the next night', async () => {
    const night = await t.createAccount();
    const mondayNight = { days: ['mon'], start: '22:00', end: '06:00', time_zone: 'Europe/Berlin' };
    const set = await t.request({ method: 'PATCH', url: '/api/v1/rhythm/telegram', key: night.testKey, body: { send_window: mondayNight } });
    assert.equal(set.statusCode, 200, set.body);
    assert.deepEqual(set.json().send_window, mondayNight);
    // Monday afternoon in Berlin (the tests above left the clock past 14:00 UTC): waits for 22:00, 20:00 UTC.
    const evening = await send(night.testKey);
    assertWaitsUntil(await status(evening, night.testKey), '2026-03-30T20:00:00Z');
    // 01:30 on Tuesday in Berlin: Monday's night is still open, so both the waiting note and a new one go.
    await passUntil('2026-03-30T23:30:00Z');
    assert.equal((await t.waitForStatus(night.testKey, evening, ['delivered', 'failed'])).status, 'delivered');
    const inTheNight = await send(night.testKey);
    assert.equal((await t.waitForStatus(night.testKey, inTheNight, ['delivered', 'failed'])).status, 'delivered');
    // 06:00 on Tuesday in Berlin: closed until next Monday 22:00.
    await passUntil('2026-03-31T04:00:05Z');
    const morning = await send(night.testKey);
    assertWaitsUntil(await status(morning, night.testKey), '2026-04-06T20:00:00Z');
  });
});
