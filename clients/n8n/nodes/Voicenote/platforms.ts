import type { INodePropertyOptions } from 'n8n-workflow';

/** The platforms voicenote delivers to, as n8n's option lists show them. */
export const PLATFORMS: INodePropertyOptions[] = [
  { name: 'LinkedIn', value: 'linkedin' },
  { name: 'Telegram', value: 'telegram' },
  { name: 'WhatsApp', value: 'whatsapp' },
];
