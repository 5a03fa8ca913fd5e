/** RELIABILITY.md, where each reliability script owns one section. */
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { machineDescription } from '../report.js';
import { ROOT } from './cluster.js';

export const RELIABILITY_FILE = join(ROOT, 'RELIABILITY.md');

const HEADER = `# Reliability

What holds when things go wrong, measured. Each section below is written by the script it names
(\`bench/reliability/\`, run with \`node --import tsx\`); rerunning a script replaces only its own
section. Each script starts real \`voicenote\` processes (\`serve --no-worker\` and \`worker\` from
\`bin/voicenote.js\`, so run \`npm run build\` first) on PostgreSQL and Redis on this machine, a fake
Telegram Bot API in a process of its own that counts what it receives, and drives them over loopback
with bounded loops. Scripts that restart PostgreSQL or Redis take an exclusive lock on
\`/tmp/voicenote-services.lock\` and leave both running. The suite keeps short versions of R4–R7
(\`test/reliability-*.test.ts\`), and checks on real processes what the scenarios take for granted:
a stopping process that something holds up (a client that never finishes its request) still
aborts a delivery hanging at the platform at \`SHUTDOWN_GRACE_MS\` and hands its message back, then
ends at \`SHUTDOWN_GRACE_MS\` + \`SHUTDOWN_MARGIN_MS\` with exit code 1 and a line saying so; one with
nothing in flight exits 0; an uncaught exception or unhandled rejection in \`serve\` or \`worker\` exits 70
with the error on stderr (\`test/cli.test.ts\`); an aborted conversion leaves no ffmpeg running
(\`test/audio-convert.test.ts\`).
`;

/** Puts `markdown` into RELIABILITY.md between this script's markers (replacing an older run's). */
export async function writeReliabilitySection(name: string, title: string, command: string, markdown: string): Promise<void> {
  const start = `<!-- reliability:${name}:start -->`;
  const end = `<!-- reliability:${name}:end -->`;
  const block = `${start}\n## ${title}\n\n${machineDescription()} Run ${new Date().toISOString()}.\n\nCommand: \`${command}\`\n\n${markdown.trim()}\n${end}`;
  let current: string;
  try {
    current = await readFile(RELIABILITY_FILE, 'utf8');
  } catch {
    current = HEADER;
  }
  const from = current.indexOf(start);
  const to = from === -1 ? -1 : current.indexOf(end, from);
  const sections = from !== -1 && to !== -1 ? current.slice(0, from) + block + current.slice(to + end.length) : `${current.trimEnd()}\n\n${block}\n`;
  // Sections in R-number order, whichever ran last.
  const parts = [...sections.matchAll(/<!-- reliability:([a-z0-9-]+):start -->[\s\S]*?<!-- reliability:\1:end -->/g)].map((m) => ({ name: m[1]!, text: m[0] }));
  parts.sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }));
  const next = `${HEADER}\n${parts.map((p) => p.text).join('\n\n')}\n`;
  const tmp = `${RELIABILITY_FILE}.${process.pid}.tmp`;
  await writeFile(tmp, next);
  await rename(tmp, RELIABILITY_FILE);
}
