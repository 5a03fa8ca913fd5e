/**
 * A bot token out of any text that may echo it: the token sits in the URL path of every Bot API call, so
 * undici's errors, a proxy's page or an error description can carry it. Every copy goes, the URL-encoded
 * form too, and the secret part (after the colon) on its own: the bot id before it is public (every
 * message the bot sends names it), the secret is the credential. The list of forms to hide is made on
 * first use: nearly every call succeeds and scrubs nothing.
 */
export function scrubber(token: string): (text: string) => string {
  let sorted: string[] | undefined;
  return (text) => {
    if (sorted === undefined) {
      const secrets = new Set<string>([token, encodeURIComponent(token)]);
      const secretPart = token.slice(token.indexOf(':') + 1);
      // A valid token's secret has 35 characters or more (rules.ts); a stray short one would mangle text.
      if (secretPart.length >= 16) secrets.add(secretPart);
      sorted = [...secrets].sort((a, b) => b.length - a.length);
    }
    return sorted.reduce((out, secret) => out.split(secret).join('<bot token>'), text);
  };
}

/** `scrubber(token)(text)`, once. */
export function scrubToken(text: string, token: string): string {
  return scrubber(token)(text);
}
