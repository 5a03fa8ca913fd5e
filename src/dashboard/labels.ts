/** A platform's name as people write it (the API's values are lower case). */
const PLATFORM_LABEL: Record<string, string> = { linkedin: 'LinkedIn', telegram: 'Telegram', whatsapp: 'WhatsApp' };

export const platformLabel = (name: string): string => PLATFORM_LABEL[name] ?? name;

/** A kind of sender (GET /senders' `kind`) as people say it. */
const SENDER_KIND_LABEL: Record<string, string> = {
  whatsapp_session: 'WhatsApp sessions',
  linkedin_cookie: 'LinkedIn sessions (li_at cookies)',
  telegram_bot: 'Telegram bots',
  telegram_account: 'Linked Telegram accounts',
};

export const senderKindLabel = (kind: string): string => SENDER_KIND_LABEL[kind] ?? kind;
