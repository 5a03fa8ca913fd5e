import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * R7 (RELIABILITY.md): looks for secrets in clear in files — verbatim, URL-encoded, hex, or as the
 * base64 a secret becomes inside a longer base64 text (each of the three byte alignments). Shared by
 * the suite (test/reliability-secrets.test.ts) and bench/reliability/r7-secrets-scan.ts.
 */

export interface Finding {
  file: string;
  secret: string;
  encoding: string;
}

/** The base64 characters that depend only on `secret`, for each alignment it may sit at in a longer text. */
function base64Cores(secret: Buffer): string[] {
  const cores: string[] = [];
  for (let k = 0; k < 3; k++) {
    const encoded = Buffer.concat([Buffer.alloc(k), secret]).toString('base64');
    const start = k === 0 ? 0 : Math.ceil((k * 4) / 3);
    const full = Math.floor((k + secret.length) / 3) * 4;
    const core = encoded.slice(start, full);
    if (core.length >= 12) cores.push(core);
  }
  return cores;
}

export function needlesOf(secret: string): { encoding: string; bytes: Buffer }[] {
  const raw = Buffer.from(secret, 'utf8');
  const needles = [
    { encoding: 'clear', bytes: raw },
    { encoding: 'hex', bytes: Buffer.from(raw.toString('hex')) },
    { encoding: 'utf-16', bytes: Buffer.from(secret, 'utf16le') },
  ];
  const urlEncoded = encodeURIComponent(secret);
  if (urlEncoded !== secret) needles.push({ encoding: 'url-encoded', bytes: Buffer.from(urlEncoded) });
  for (const core of base64Cores(raw)) {
    needles.push({ encoding: 'base64', bytes: Buffer.from(core) });
    needles.push({ encoding: 'base64url', bytes: Buffer.from(core.replace(/\+/g, '-').replace(/\//g, '_')) });
  }
  return needles;
}

/** Every regular file under `dir`, recursively (missing dirs give nothing). */
export async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(path)));
    else if (e.isFile()) out.push(path);
  }
  return out;
}

export async function scanFiles(files: string[], secrets: string[]): Promise<{ findings: Finding[]; bytes: number }> {
  const needles = secrets.flatMap((secret) => needlesOf(secret).map((n) => ({ ...n, secret })));
  const findings: Finding[] = [];
  let bytes = 0;
  for (const file of files) {
    const size = (await stat(file).catch(() => null))?.size ?? 0;
    if (size === 0) continue;
    const content = await readFile(file).catch(() => null);
    if (!content) continue;
    bytes += content.length;
    for (const n of needles) if (content.includes(n.bytes)) findings.push({ file, secret: n.secret, encoding: n.encoding });
  }
  return { findings, bytes };
}

/** The secret itself never goes into a report: its first characters and length say which one it was. */
export const describeSecret = (secret: string): string => `${secret.slice(0, 8)}… (${secret.length} chars)`;
