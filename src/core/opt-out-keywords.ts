/**
 * Opt-out by reply: a reply whose whole text, folded, is one of these (or one of the account's own)
 * suppresses its sender. Folded means trimmed, in lower case, without accents, punctuation or symbols,
 * and with runs of spaces as one: "STOP!", " Stop. " and "stop" are one keyword, "Désabonner" is
 * "desabonner", "opt-out" is "optout". Only whole messages: "don't stop" or "stop by tomorrow" are not.
 * docs/sending.md lists them ("Opt-outs and suppressions").
 */

/** The SMS industry's keywords (CTIA), and everyday ones in English, Spanish, Portuguese, French, German and Italian. */
export const BUILT_IN_OPT_OUT_KEYWORDS: Readonly<Record<string, readonly string[]>> = {
  sms: ['stop', 'stopall', 'stop all', 'unsubscribe', 'cancel', 'end', 'quit', 'optout', 'opt out', 'revoke'],
  en: ['please stop', 'stop please', 'remove me', 'unsubscribe me', 'take me off', 'take me off your list', 'do not contact me', 'dont contact me', 'no more messages', 'stop messaging me', 'stop texting me'],
  es: ['baja', 'darme de baja', 'dar de baja', 'parar', 'para', 'basta', 'cancelar', 'no mas', 'no me escribas', 'eliminarme', 'desuscribir', 'desuscribirme'],
  pt: ['pare', 'sair', 'descadastrar', 'descadastre', 'remover', 'nao quero mais', 'chega', 'parem'],
  fr: ['arret', 'arreter', 'arretez', 'desabonner', 'se desabonner', 'desabonnement', 'desinscrire', 'me desinscrire', 'annuler'],
  de: ['stopp', 'abmelden', 'abbestellen', 'austragen', 'kundigen', 'ende', 'aufhoren', 'nicht mehr schreiben'],
  it: ['cancella', 'cancellami', 'disiscrivi', 'disiscrivimi', 'annulla', 'rimuovimi', 'smetti', 'non scrivermi piu'],
};

const BUILT_IN = new Set(Object.values(BUILT_IN_OPT_OUT_KEYWORDS).flat());

/** A text as keywords are compared: NFKD without combining marks, lower case, no punctuation or symbols, single spaces. */
export function foldKeyword(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[\p{P}\p{S}]/gu, '')
    .replace(/\s+/gu, ' ')
    .trim();
}

/** The reply's whole text is an opt-out: a built-in keyword or one of `own` (already folded). */
export function isOptOut(text: string | null, own: readonly string[] = []): boolean {
  if (text === null) return false;
  // A long message is never one keyword; folding it would be work for nothing.
  if (text.length > 200) return false;
  const folded = foldKeyword(text);
  return folded !== '' && (BUILT_IN.has(folded) || own.includes(folded));
}
