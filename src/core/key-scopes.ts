/**
 * What an API key may do (docs/security.md, "Key scopes"). Each scope includes the ones below it:
 * `read` answers GET requests only; `send` also sends, cancels and checks recipients; `full` (every key
 * made before scopes existed, and the default) does everything the API offers.
 */
export const KEY_SCOPES = ['read', 'send', 'full'] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

export const isKeyScope = (value: unknown): value is KeyScope => typeof value === 'string' && (KEY_SCOPES as readonly string[]).includes(value);

/** Whether a key of `scope` may make a request that needs `needed`. */
export const scopeAllows = (scope: KeyScope, needed: KeyScope): boolean => KEY_SCOPES.indexOf(scope) >= KEY_SCOPES.indexOf(needed);

/** A sender a key may be limited to: a sender id, a WhatsApp session id or a Telegram account session id. */
export const KEY_SENDER_PATTERN = /^(snd|ws|ts)_[0-9A-Za-z]{24}$/;

/** The stored column (a JSON array, or null for "any sender") as a list; anything unreadable is no sender at all. */
export function sendersOf(stored: string | null): readonly string[] | null {
  if (stored === null) return null;
  try {
    const parsed: unknown = JSON.parse(stored);
    return Array.isArray(parsed) ? parsed.filter((s): s is string => typeof s === 'string') : [];
  } catch {
    return [];
  }
}

/** The scope a stored key row holds; an unknown value is read as the narrowest. */
export const scopeOf = (stored: string | null | undefined): KeyScope => (stored === undefined || stored === null ? 'full' : isKeyScope(stored) ? stored : 'read');
