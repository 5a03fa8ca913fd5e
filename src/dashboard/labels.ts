/** A platform's name as people write it (the API's values are lower case). */
const PLATFORM_LABEL: Record<string, string> = { linkedin: 'LinkedIn', telegram: 'Telegram', whatsapp: 'WhatsApp' };

export const platformLabel = (name: string): string => PLATFORM_LABEL[name] ?? name;
