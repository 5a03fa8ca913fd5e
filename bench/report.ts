/**
 * Shared by the bench/ scripts: the machine a run happened on, and BENCHMARKS.md, where each script
 * owns one section between `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->`.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, release, totalmem } from 'node:os';

export const BENCHMARKS_FILE = new URL('../BENCHMARKS.md', import.meta.url);

const HEADER = `# Benchmarks

Each section below is written by the script it names (\`npm run bench\` → \`bench/api.ts\`, which writes
"HTTP API" and "Delivery", each only when it ran: \`BENCH_ONLY=http|delivery\`; \`npm run bench:audio\` →
\`bench/audio.ts\`); rerunning a script replaces only its own sections.
Every section states the machine, the date and the exact command, and compares its numbers against
a baseline measured in the same run: compare ratios across sections and machines, not absolute numbers.
`;

function cpuModel(): string {
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    const model = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim();
    if (model) return model;
  } catch {
    // not Linux: fall through to what Node knows
  }
  return cpus()[0]?.model?.trim() || 'unknown CPU';
}

function nproc(): string {
  try {
    return execFileSync('nproc', [], { encoding: 'utf8' }).trim();
  } catch {
    return String(availableParallelism());
  }
}

/** One markdown line: cores, memory, CPU model, kernel, Node version. */
export function machineDescription(): string {
  const gib = (totalmem() / 1024 ** 3).toFixed(1);
  return `Machine: ${nproc()} cores (\`nproc\`), ${gib} GiB memory, CPU \`${cpuModel()}\`, Linux ${release()}, Node ${process.version}.`;
}

/**
 * The command that reproduces this run: the BENCH_* (and FFMPEG_PATH) variables that were set, then
 * `npm run <script>` when started through npm, otherwise the node command line. Passwords in URLs are hidden.
 */
export function commandLine(fallback: string): string {
  const env = Object.entries(process.env)
    .filter(([k, v]) => (k.startsWith('BENCH_') || k === 'FFMPEG_PATH') && v !== undefined && v !== '')
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${redact(v as string)}`);
  const script = process.env.npm_lifecycle_event;
  const cmd = script ? `npm run ${script}` : fallback;
  return [...env, cmd].join(' ');
}

function redact(value: string): string {
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]+):[^@/]*@/i, '$1:***@');
}

/**
 * Puts `markdown` into BENCHMARKS.md between this section's markers: replaces the old section when
 * there is one, appends otherwise, and creates the file (with its header) when it is missing.
 */
export async function writeSection(name: string, markdown: string): Promise<void> {
  if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`bad section name ${name}`);
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  const block = `${start}\n${markdown.trim()}\n${end}`;
  let current: string;
  try {
    current = await readFile(BENCHMARKS_FILE, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    current = HEADER;
  }
  const from = current.indexOf(start);
  const to = from === -1 ? -1 : current.indexOf(end, from);
  if (from !== -1 && to === -1) throw new Error(`${BENCHMARKS_FILE.pathname} has ${start} without ${end}; fix it by hand`);
  let next: string;
  if (from !== -1 && to !== -1) {
    next = current.slice(0, from) + block + current.slice(to + end.length);
  } else {
    next = `${current.trimEnd()}\n\n${block}\n`;
  }
  const tmp = new URL(`../BENCHMARKS.md.${process.pid}.tmp`, import.meta.url);
  await writeFile(tmp, next);
  await rename(tmp, BENCHMARKS_FILE);
}
