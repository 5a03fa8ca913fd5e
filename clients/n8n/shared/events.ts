/**
 * The webhook events the service sends (docs/webhooks.md, "Events"), as the trigger offers them. The
 * package's test checks this list against the service's own, so a new event is offered here too.
 */
export const VOICENOTE_EVENTS: ReadonlyArray<{ value: string; name: string; description: string }> = [
  { value: 'voice_note.delivered', name: 'Voice Note Delivered', description: 'The platform accepted the voice note' },
  { value: 'voice_note.failed', name: 'Voice Note Failed', description: 'The voice note failed for good' },
  { value: 'voice_note.canceled', name: 'Voice Note Canceled', description: 'The voice note was canceled before it was sent' },
  { value: 'voice_note.read', name: 'Voice Note Read', description: 'The recipient opened the voice note (WhatsApp, linked Telegram accounts)' },
  { value: 'voice_note.played', name: 'Voice Note Played', description: 'The recipient listened to the voice note (WhatsApp, linked Telegram accounts)' },
  { value: 'voice_note.replied', name: 'Voice Note Replied', description: 'The recipient answered the voice note' },
  { value: 'whatsapp_session.updated', name: 'WhatsApp Session Updated', description: "A WhatsApp session's status changed" },
  { value: 'sender.updated', name: 'Sender Updated', description: "A sender's health status changed" },
  { value: 'telegram_session.updated', name: 'Telegram Session Updated', description: "A linked Telegram account's status changed" },
  { value: 'recipient.opted_out', name: 'Recipient Opted Out', description: 'A recipient asked to receive no more voice notes' },
];
