import { isViolation, stringField, type Violation } from '../rules.js';

export type WhatsappSessionRef = {
  platform: 'whatsapp';
  session_id: string;
};

const WHATSAPP_RECIPIENT = /^[0-9]{7,15}$/;
const WHATSAPP_SESSION_ID = /^ws_[0-9A-Za-z]{24}$/;

export function checkWhatsappRecipient(recipient: string): Violation | null {
  return WHATSAPP_RECIPIENT.test(recipient)
    ? null
    : { field: 'recipient', message: 'whatsapp recipient must be the phone number with country code: 7 to 15 digits, no "+"' };
}

export function checkWhatsappSession(session: Record<string, unknown>): WhatsappSessionRef | Violation {
  const id = stringField(session, 'session_id');
  if (isViolation(id)) return id;
  if (!WHATSAPP_SESSION_ID.test(id)) return { field: 'session.session_id', message: 'session.session_id must be a WhatsApp session id (ws_…)' };
  return { platform: 'whatsapp', session_id: id };
}
