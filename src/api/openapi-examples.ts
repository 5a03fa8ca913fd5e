/**
 * Request bodies that work as they are, for the interactive docs' "Try it out" (the UI fills the body
 * from the media type's `example`): with a sandbox key each one is accepted. POST /send names the
 * service's own sample on the address the docs were loaded from, which a sandbox key may use (docs/sandbox.md,
 * "The sample on the service's own address"), so the first try delivers a note without any setup.
 */

/** The quick start's sandbox Telegram bot: any well-formed token works in the sandbox. */
const SANDBOX_BOT_TOKEN = '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';
/** The one cloud password the sandbox's two-step Telegram accounts accept (docs/senders.md, "Telegram accounts"). */
const SANDBOX_TELEGRAM_PASSWORD = 'sandbox-password';

function examples(origin: string): Record<string, Record<string, unknown>> {
  return {
    'POST /api/v1/send': {
      platform: 'telegram',
      recipient: '123456789',
      audio_url: `${origin}/samples/hello.ogg`,
      session: { bot_token: SANDBOX_BOT_TOKEN },
    },
    'POST /api/v1/whatsapp/sessions': { phone_number: '14155550100' },
    'POST /api/v1/whatsapp/sessions/{session_id}/simulate': { event: 'scan' },
    'POST /api/v1/webhook_endpoints': {
      url: 'https://example.com/voicenote-webhooks',
      events: ['voice_note.delivered', 'voice_note.failed'],
      description: 'orders',
    },
    'POST /api/v1/webhook_endpoints/{endpoint_id}/roll_secret': { previous_secret_expires_in: 3600 },
    'POST /api/v1/webhook_endpoints/{endpoint_id}/test': { type: 'voice_note.delivered' },
    'POST /api/v1/recipients/check': { platform: 'telegram', recipient: '123456789', session: { bot_token: SANDBOX_BOT_TOKEN } },
    // Linking a Telegram account takes no fields: the empty object is the whole body.
    'POST /api/v1/telegram/sessions': {},
    // The sandbox's two-step account: scanned with a password, then given the one password it accepts.
    'POST /api/v1/telegram/sessions/{session_id}/simulate': { event: 'scan_with_password' },
    'POST /api/v1/telegram/sessions/{session_id}/password': { password: SANDBOX_TELEGRAM_PASSWORD },
    // Office hours in Berlin for the account's Telegram notes (sandbox and live alike).
    'PATCH /api/v1/rhythm/{platform}': { send_window: { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '18:00', time_zone: 'Europe/Berlin' } },
    // A sandbox sender keeps a proxy after checking only its syntax (docs/proxies.md).
    'PATCH /api/v1/senders/{sender_id}': { proxy: 'socks5://user:secret@proxy.example:1080' },
    'POST /api/v1/suppressions': { recipients: [{ platform: '*', recipient: '+14155550123', note: 'asked not to be contacted' }] },
    'PATCH /api/v1/opt_out_settings': { enabled: true, keywords: ['no more notes'] },
  };
}

type Operation = { requestBody?: { content?: Record<string, { example?: unknown }> } };
type Document = { paths?: Record<string, Record<string, Operation>> };

/** Sets the example body of every operation that takes a JSON body; `origin` is where the docs were loaded from. */
export function addExampleBodies<T>(document: T, origin: string): T {
  const byOperation = examples(origin);
  for (const [path, operations] of Object.entries((document as Document).paths ?? {})) {
    for (const [method, operation] of Object.entries(operations)) {
      const json = operation.requestBody?.content?.['application/json'];
      const example = byOperation[`${method.toUpperCase()} ${path}`];
      if (json && example) json.example = example;
    }
  }
  return document;
}
