import { createCipheriv, createDecipheriv, createSecretKey, type KeyObject } from 'node:crypto';
import { randomBytesPooled } from './random.js';

const VERSION = 'v1';

/** AES-256-GCM with a random nonce per value; the output is one printable string safe for a TEXT column. */
export class SecretBox {
  /** A KeyObject, not the bytes: each cipher made from it skips importing the key again. */
  readonly #key: KeyObject;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('SecretBox needs a 32-byte key');
    this.#key = createSecretKey(key);
  }

  seal(plaintext: string): string {
    const nonce = randomBytesPooled(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, nonce);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, nonce.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
  }

  open(sealed: string): string {
    const [version, nonce, tag, body] = sealed.split('.');
    if (version !== VERSION || !nonce || !tag || body === undefined) throw new Error('not a sealed value');
    const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(nonce, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
  }

  sealJson(value: unknown): string {
    return this.seal(JSON.stringify(value));
  }

  openJson<T>(sealed: string): T {
    return JSON.parse(this.open(sealed)) as T;
  }
}
