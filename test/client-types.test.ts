import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { test } from './fixtures/timed.js';
import type { SendRequest, VoicenoteClient } from '../clients/typescript/src/index.js';

/*
 * The typed client refuses a send body that does not fit its platform. The proof is this file's
 * compilation (`npm run typecheck` compiles test/): every `@ts-expect-error` below must meet an
 * error, or tsc fails with "Unused '@ts-expect-error' directive". The bodies that must compile are
 * checked by the same run. At runtime the file only checks the union's members by value.
 */

const telegram: SendRequest = {
  platform: 'telegram',
  recipient: '123456789',
  audio_url: 'https://example.com/hello.ogg',
  session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' },
  caption: 'Hello!',
  duration: null,
  send_at: '2026-12-01T09:00:00Z',
  cancel_on_reply: true,
  recording_indicator: true,
};
const linkedin: SendRequest = {
  platform: 'linkedin',
  recipient: 'jane-smith-a1b2c3',
  audio_url: 'https://example.com/hello.ogg',
  session: { li_at: 'AQED…', csrf_token: 'ajax:1', user_agent: 'Mozilla/5.0 (X11; Linux x86_64)', cookies: 'li_at=AQED…; JSESSIONID="ajax:1"' },
  duration: 12.5,
};
const whatsapp: SendRequest = {
  platform: 'whatsapp',
  recipient: '14155550100',
  audio_url: 'https://example.com/hello.ogg',
  session: { session_id: 'ws_abc' },
  recording_indicator: false,
};

const refused: SendRequest[] = [
  // @ts-expect-error a platform the API does not have
  { platform: 'signal', recipient: '1', audio_url: 'https://example.com/a.ogg', session: { bot_token: 'x' } },
  // @ts-expect-error a Telegram body with a LinkedIn session
  { platform: 'telegram', recipient: '1', audio_url: 'https://example.com/a.ogg', session: { li_at: 'a', csrf_token: 'b' } },
  // @ts-expect-error a WhatsApp body with a bot token
  { platform: 'whatsapp', recipient: '14155550100', audio_url: 'https://example.com/a.ogg', session: { bot_token: 'x' } },
  // @ts-expect-error a caption is Telegram's only
  { platform: 'whatsapp', recipient: '14155550100', audio_url: 'https://example.com/a.ogg', session: { session_id: 'ws_1' }, caption: 'hi' },
  // @ts-expect-error no recording indicator on LinkedIn
  { platform: 'linkedin', recipient: 'jane', audio_url: 'https://example.com/a.ogg', session: { li_at: 'a', csrf_token: 'b' }, recording_indicator: true },
  // @ts-expect-error a LinkedIn session needs its csrf_token
  { platform: 'linkedin', recipient: 'jane', audio_url: 'https://example.com/a.ogg', session: { li_at: 'a' } },
  // @ts-expect-error cancel_on_reply is a boolean
  { platform: 'telegram', recipient: '1', audio_url: 'https://example.com/a.ogg', session: { bot_token: 'x' }, send_at: '2026-12-01T09:00:00Z', cancel_on_reply: 'yes' },
  // @ts-expect-error no session at all
  { platform: 'telegram', recipient: '1', audio_url: 'https://example.com/a.ogg' },
];

/** The message detail carries the replies and when the first came, as the client's types say. */
export function repliesOfTheDetail(client: VoicenoteClient): void {
  void client.GET('/api/v1/messages/{message_id}', { params: { path: { message_id: 'msg_1' } } }).then(({ data }) => {
    const first: string | null | undefined = data?.first_replied_at;
    const kinds: Array<'text' | 'voice' | 'audio' | 'image' | 'video' | 'document' | 'sticker' | 'other'> | undefined = data?.replies.map((r) => r.type);
    const texts: Array<string | null> | undefined = data?.replies.map((r) => r.text);
    void [first, kinds, texts];
  });
  void client.GET('/api/v1/messages', { params: { query: { replied: 'true' } } });
}

/** The client's POST takes the same union: a wrong pairing does not compile there either. */
export function wrongPairingThroughTheClient(client: VoicenoteClient): void {
  // @ts-expect-error platform 'signal'
  void client.POST('/api/v1/send', { body: { platform: 'signal', recipient: '1', audio_url: 'https://example.com/a.ogg', session: { bot_token: 'x' } } });
  void client.POST('/api/v1/send', { body: telegram });
}

describe('the typed client\'s send body (compiled by npm run typecheck)', () => {
  test('one shape per platform, told apart by platform', () => {
    assert.deepEqual([telegram, linkedin, whatsapp].map((b) => b.platform), ['telegram', 'linkedin', 'whatsapp']);
    assert.equal(refused.length, 8);
  });
});
