import { randomBytes } from 'node:crypto';
import { newMessageId } from './ids.js';

// Reuses the time-sortable 24-character body of message ids, so these sort by creation time too.
const timeSortable = (now?: number): string => newMessageId(now).slice('msg_'.length);

export const newWebhookEndpointId = (now?: number): string => `we_${timeSortable(now)}`;
export const newWebhookEventId = (now?: number): string => `evt_${timeSortable(now)}`;
export const newWebhookDeliveryId = (now?: number): string => `whd_${timeSortable(now)}`;
export const newRowId = (prefix: string, now?: number): string => `${prefix}_${timeSortable(now)}`;

/** A Standard Webhooks secret: `whsec_` and the base64 of 24 random bytes (the signing key). */
export const newWebhookSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;
