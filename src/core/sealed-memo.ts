import { hash } from 'node:crypto';
import type { SecretBox } from './secret-box.js';

/** How long a sealed value is handed out again for the same plaintext. */
const KEEP_MS = 60_000;
/** Distinct plaintexts remembered at once; the oldest is forgotten first. */
const MAX_ENTRIES = 1_000;

/**
 * Seals values that repeat (the platform credentials of `POST /send`: an outreach run sends thousands
 * of voice notes with one bot token or one LinkedIn session) once a minute rather than once each.
 * Setting up a cipher costs the event loop about 20 µs, a tenth of a whole send; a SHA-256 costs 5.
 *
 * Handing out one sealed value for one plaintext is safe with AES-GCM: a nonce is reused only with the
 * same key AND the same plaintext, so the outputs are identical and reveal nothing but that two
 * messages carry the same credentials (which their affinity key shows anyway). The memo is keyed by
 * the plaintext's SHA-256, so it holds no credentials in clear.
 */
export class SealedMemo {
  readonly #box: SecretBox;
  readonly #entries = new Map<string, { sealed: string; until: number }>();

  constructor(box: SecretBox) {
    this.#box = box;
  }

  sealJson(value: unknown, now = Date.now()): string {
    const plaintext = JSON.stringify(value);
    const digest = hash('sha256', plaintext, 'base64');
    const kept = this.#entries.get(digest);
    if (kept && kept.until > now) return kept.sealed;
    const sealed = this.#box.seal(plaintext);
    this.#entries.delete(digest); // re-inserted last: the Map's order is the order of expiry
    if (this.#entries.size >= MAX_ENTRIES) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(digest, { sealed, until: now + KEEP_MS });
    return sealed;
  }
}
