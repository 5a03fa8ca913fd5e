import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far a delivery's `webhook-timestamp` may be from now, as the Standard Webhooks libraries allow. */
export const SIGNATURE_TOLERANCE_SECONDS = 5 * 60;

export interface SignedDelivery {
  id: string | undefined;
  timestamp: string | undefined;
  signature: string | undefined;
  body: string;
}

/**
 * Why a delivery is not the service's (a missing header, a stale timestamp, no matching signature),
 * or null when it verifies. Standard Webhooks: HMAC-SHA256 of `${id}.${timestamp}.${body}` keyed with
 * the base64 part of the `whsec_` secret; the header may carry several `v1,<base64>` signatures (after a
 * secret roll), any one of which verifies.
 */
export function signatureProblem(secret: string, delivery: SignedDelivery, nowSeconds = Math.floor(Date.now() / 1000)): string | null {
  const { id, timestamp, signature, body } = delivery;
  if (!id || !timestamp || !signature) return 'missing webhook-id, webhook-timestamp or webhook-signature header';
  if (!/^\d+$/.test(timestamp)) return 'webhook-timestamp is not Unix seconds';
  if (Math.abs(nowSeconds - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) return 'webhook-timestamp is too far from now';
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  const matches = signature.split(' ').some((part) => {
    const [version, value] = part.split(',');
    if (version !== 'v1' || !value) return false;
    const given = Buffer.from(value, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  return matches ? null : 'no signature matches';
}
