import { createHmac } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';

/**
 * A Standard Webhooks signature: `v1,` and the base64 HMAC-SHA256 of `${id}.${timestamp}.${body}`,
 * keyed with the base64-decoded part of the secret after `whsec_`.
 */
export function sign(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/**
 * The headers of one delivery. Right after a secret roll both secrets sign (space-separated, as the
 * specification allows), so a receiver still holding the old secret keeps verifying until it switches.
 */
export function webhookHeaders(secrets: string[], id: string, timestampSeconds: number, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'voicenote-webhooks/1',
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': secrets.map((secret) => sign(secret, id, timestampSeconds, body)).join(' '),
  };
}
