/**
 * The CPU a distinct note costs: `node --import tsx bench/audio-cpu.ts`
 * N distinct one-minute speech sources (espeak-ng voices and speeds, 44.1 kHz stereo 128 kb/s MP3, served over
 * HTTP on loopback) go through `prepare()` for WhatsApp and for Telegram on a fresh cache: download, hashing,
 * probe, the one ffmpeg run that decodes for the encoder and the waveform, the encode (in the pipeline's encoder
 * processes with the libopus binding, else by that ffmpeg run), the Ogg pages, the cache. Reported per
 * audio-minute: the CPU of this process and of its children (user + system; encoder processes and ffmpeg runs,
 * counted once they have exited: the pipeline is closed before the reading), beside the decode floor
 * (ffmpeg decoding the same sources to nothing), with the wall time and the notes a core converts a minute.
 * With BENCH_BASELINE_DIR (a checkout of the code to compare with, e.g. `git archive main | tar -x -C DIR`
 * and DIR/node_modules linked to ours), the baseline's pipeline runs in the same process, alternately with
 * ours, round by round, so drift in a shared machine's load hits both alike.
 * Ours is the compiled dist/ (`npm run build` first), as a newcomer's `npm start` runs it.
 * Needs `espeak-ng` (Debian: `apt-get install espeak-ng`). Writes its section of BENCHMARKS.md.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import * as ours from '../src/audio/index.js';
import { loadNativeOpus } from '../src/audio/opus-encoder.js';
import { audioTargetFor } from '../src/platforms/registry.js';
import { startAudioServer } from '../test/fakes/audio-server.js';
import { childrenCpuSeconds, totalCpuSeconds } from './cpu-time.js';
import { commandLine, machineDescription, writeSection } from './report.js';

const run = promisify(execFile);
const NOTES = Number(process.env.BENCH_NOTES ?? 6);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BASELINE_DIR = process.env.BENCH_BASELINE_DIR;
const PLATFORMS = ['whatsapp', 'telegram'] as const;
const VOICES = ['en-us', 'en-gb', 'en-us+f3', 'en-gb+f4', 'en-gb-scotland', 'en-us+m3'];
const TEXT =
  'Hello, this is Tom from Acme. I saw your post about scaling outbound sales, and I wanted to share a short idea with you. ' +
  'We help teams like yours book more meetings without adding headcount. Would you be open to a quick call next week? ';

type Pipelines = typeof ours;
interface Side {
  label: string;
  audio: Pipelines;
}

async function makeSources(ffmpegPath: string, dir: string): Promise<string[]> {
  const paths: string[] = [];
  for (let i = 0; i < NOTES; i++) {
    const wav = join(dir, `note-${i}.wav`);
    // Voice and speed differ per note, and the name is spoken: no two sources are the same file.
    execFileSync('espeak-ng', ['-v', VOICES[i % VOICES.length]!, '-s', String(150 + 7 * i), '-w', wav, `Hi prospect number ${i + 1}. ${TEXT.repeat(4)}`]);
    const mp3 = join(dir, `note-${i}.mp3`);
    await run(ffmpegPath, ['-nostdin', '-v', 'error', '-y', '-stream_loop', '-1', '-i', wav, '-t', '60', '-ar', '44100', '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', mp3]);
    await rm(wav);
    paths.push(mp3);
  }
  return paths;
}

async function main(): Promise<void> {
  const ffmpegPath = ours.resolveFfmpegPath(process.env.FFMPEG_PATH);
  let nativeName: string | null = null;
  try {
    nativeName = loadNativeOpus().name;
  } catch {
    // the pipeline falls back to ffmpeg's encoder, and the report says so
  }
  const sides: Side[] = [];
  if (BASELINE_DIR) {
    const url = pathToFileURL(join(resolve(BASELINE_DIR), 'src/audio/index.ts')).href;
    sides.push({ label: 'baseline', audio: (await import(url)) as Pipelines });
  }
  // The compiled pipeline, as `npm start` runs it: its encoder processes then start from JavaScript
  // (from the TypeScript sources each would spend a second of CPU compiling itself through tsx).
  const compiled = (await import(pathToFileURL(resolve('dist/audio/index.js')).href)) as Pipelines;
  sides.push({ label: BASELINE_DIR ? 'this branch' : 'this code', audio: compiled });
  const work = await mkdtemp(join(tmpdir(), 'voicenote-bench-audio-cpu-'));
  const sources = await makeSources(ffmpegPath, work);
  const server = await startAudioServer();
  sources.forEach((path, i) => server.route(`/note-${i}.mp3`, { kind: 'file', path, contentType: 'audio/mpeg' }));
  const minutes = NOTES; // one minute each

  const floor: number[] = [];
  const results = new Map<string, { cpu: number[]; wall: number[] }>();
  const key = (side: Side, platform: string) => `${side.label}|${platform}`;

  const batch = async (side: Side, platform: (typeof PLATFORMS)[number]): Promise<{ cpu: number; wall: number }> => {
    const dataDir = await mkdtemp(join(work, 'data-'));
    const pipeline = side.audio.createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true });
    const cpu0 = totalCpuSeconds();
    const t0 = performance.now();
    // As many at once as the pipeline runs ffmpeg (one a core by default).
    let next = 0;
    await Promise.all(
      Array.from({ length: availableParallelism() }, async () => {
        while (next < NOTES) {
          const i = next++;
          const a = await pipeline.prepare({ url: server.url(`/note-${i}.mp3`), target: audioTargetFor(platform) });
          if (a.cacheHit) throw new Error('a distinct note was a cache hit');
          a.release();
        }
      }),
    );
    const wall = (performance.now() - t0) / 1000;
    // Closed first: its encoder processes (and the ffmpeg runs they started) count once they have exited.
    await pipeline.close();
    const cpu = totalCpuSeconds() - cpu0;
    await rm(dataDir, { recursive: true, force: true });
    return { cpu, wall };
  };

  for (const side of sides) for (const p of PLATFORMS) await batch(side, p); // warm-up: JIT, page cache
  for (let round = 0; round < ROUNDS; round++) {
    const c0 = childrenCpuSeconds();
    for (const s of sources) await run(ffmpegPath, ['-nostdin', '-v', 'error', '-i', s, '-f', 'null', '-']);
    floor.push((childrenCpuSeconds() - c0) / minutes);
    for (const p of PLATFORMS) {
      for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
        const r = await batch(side, p);
        const entry = results.get(key(side, p)) ?? { cpu: [], wall: [] };
        entry.cpu.push(r.cpu / minutes);
        entry.wall.push(r.wall);
        results.set(key(side, p), entry);
        console.log(`round ${round + 1} ${side.label} ${p}: ${(r.cpu / minutes).toFixed(2)} s CPU per audio-minute, ${r.wall.toFixed(1)} s wall`);
      }
    }
  }
  await server.close();
  await rm(work, { recursive: true, force: true });

  const median = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    const m = Math.floor(s.length / 2);
    return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  const spread = (xs: number[]): string => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
  const f = median(floor);
  const rows: string[] = [];
  for (const p of PLATFORMS) {
    for (const side of sides) {
      const r = results.get(key(side, p))!;
      const cpu = median(r.cpu);
      rows.push(
        `| ${p} | ${side.label} | ${cpu.toFixed(2)} s (${spread(r.cpu)}) | ${(cpu / f).toFixed(1)}× | ${median(r.wall).toFixed(1)} s | ${(60 / cpu).toFixed(0)} |`,
      );
    }
  }
  const ffVersion = execFileSync(ffmpegPath, ['-version'], { encoding: 'utf8' }).split('\n')[0] ?? '';
  const encoderNote = nativeName
    ? `this branch: by \`${nativeName}\` in the pipeline's encoder processes (started by its first Opus note, ended by its close, both counted), the ffmpeg run only decoding${BASELINE_DIR ? '; the baseline: as its code does it' : ''}`
    : 'by the ffmpeg run: the libopus binding is not installed';
  const report = `## The CPU of a distinct note

Measured ${new Date().toISOString()} with \`${commandLine('node --import tsx bench/audio-cpu.ts')}\` (source: \`bench/audio-cpu.ts\`).

${machineDescription()}

ffmpeg: \`${ffVersion}\` (${ffmpegPath.includes('@ffmpeg-installer') ? 'bundled @ffmpeg-installer build, no system ffmpeg' : ffmpegPath}).

${NOTES} distinct one-minute speech sources (espeak-ng, a voice and speed each; 44.1 kHz stereo 128 kb/s MP3 over HTTP
on loopback) through \`prepare()\` on a fresh cache, ${availableParallelism()} at a time: download, hashing, probe, the ffmpeg run
that decodes for the encoder and the waveform, the Opus encode (${encoderNote}), the Ogg pages (WhatsApp's three frames a
packet), the cache. CPU = this process's user +
system time and that of its children (encoder processes and ffmpeg runs; 10 ms clock ticks), per audio-minute: median of ${ROUNDS} rounds (the
range in brackets is the noise), ${BASELINE_DIR ? 'the baseline (the code before) and this branch alternately in each round, ' : ''}the
decode floor measured in each round too. Delivery itself is not in it (a fake platform's delivery costs about a
millisecond of CPU per note: "Delivery" above). "Notes a minute per core" = 60 s / CPU per note.

Decode floor (ffmpeg decoding the same MP3s to nothing): ${f.toFixed(3)} s per audio-minute (rounds: ${floor.map((x) => x.toFixed(3)).join(', ')}).

| platform | code | CPU per audio-minute (range) | × decode floor | wall, ${NOTES} notes (median) | notes a minute per core |
|---|---|---|---|---|---|
${rows.join('\n')}
`;
  console.log(report);
  await writeSection('audio-cpu', report);
}

await main();
