/**
 * The code of a failed connection, which is what a caller is told of it: the first string `code` along
 * the error and its causes (undici hands Node's socket error on as it is, or wraps it as `cause`).
 * Never the message: Node's name the address they tried (`connect ECONNREFUSED 10.0.0.5:443`), undici's
 * connect timeout too (`attempted address: …`), and an address of the operator's network is not the
 * caller's to know (the rule audio URLs follow, audio/fetch.ts).
 */
export function errorCodeOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** `errorCodeOf`, or "network error" when the error carries no code. */
export function networkErrorCode(error: unknown): string {
  return errorCodeOf(error) ?? 'network error';
}
