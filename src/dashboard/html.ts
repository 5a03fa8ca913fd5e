/**
 * Server-rendered HTML with escaping by default: every value interpolated into `html` is escaped
 * unless it is itself `Html` (a fragment built the same way, or `raw` for markup we generate).
 */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (value: string): string => value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

function render(value: Value): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map((v: Value) => render(v)).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += render(value) + strings[i + 1]!;
  });
  return new Html(out);
}

/** Markup we produced ourselves (an SVG chart): inserted as is. */
export const raw = (text: string): Html => new Html(text);

export const isoTime = (ms: number | null | undefined): string => (ms === null || ms === undefined ? '' : new Date(Number(ms)).toISOString());

/** A time for people, in UTC to the second (`withMs`: to the millisecond), with the exact ISO instant in a <time> element. */
export function timeCell(ms: number | null | undefined, empty = '—', withMs = false): Html {
  if (ms === null || ms === undefined) return html`${empty}`;
  const iso = isoTime(ms);
  return html`<time datetime="${iso}">${iso.slice(0, withMs ? 23 : 19).replace('T', ' ')} UTC</time>`;
}

/** A count for people: 10,000 rather than 10000. */
export const count = (n: number | string | bigint): string => Number(n).toLocaleString('en-US');
