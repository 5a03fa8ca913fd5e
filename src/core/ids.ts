import { randomBytes } from 'node:crypto';
import { randomBytesPooled } from './random.js';

// ASCII order, so that comparing ids as strings compares their timestamps.
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Bytes at or above this are skipped, so that every character is equally likely (248 = 4 × 62). */
const UNBIASED_BELOW = 248;

function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytesPooled(length - out.length + 4)) {
      if (byte < UNBIASED_BELOW && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

function timeBase62(ms: number, length: number): string {
  let out = '';
  let rest = Math.floor(ms);
  for (let i = 0; i < length; i++) {
    out = BASE62[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}

/** 24 base62 characters: 8 of millisecond time (good until the year 8900), 16 random. */
function timeSortable(now = Date.now()): string {
  return timeBase62(now, 8) + randomBase62(16);
}

export const newMessageId = (now?: number): string => `msg_${timeSortable(now)}`;
export const newReplyId = (now?: number): string => `rpl_${timeSortable(now)}`;
export const newWhatsappSessionId = (now?: number): string => `ws_${timeSortable(now)}`;
export const newSenderId = (now?: number): string => `snd_${timeSortable(now)}`;
export const newTelegramSessionId = (now?: number): string => `ts_${timeSortable(now)}`;
export const newSuppressionId = (now?: number): string => `sup_${timeSortable(now)}`;
export const newAccountId = (): string => `acct_${timeSortable()}`;
export const newKeyId = (): string => `key_${timeSortable()}`;

export type KeyEnv = 'test' | 'live';

/** An API key secret: `sk_test_` or `sk_live_` and 32 base62 characters. */
export const newKeySecret = (env: KeyEnv): string => `sk_${env}_${randomBase62(32)}`;

export const KEY_SECRET_PATTERN = /^sk_(test|live)_[0-9A-Za-z]{32}$/;

export const newOpaqueToken = (bytes = 24): string => randomBytes(bytes).toString('base64url');
