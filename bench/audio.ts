/**
 * Audio pipeline benchmark: `node --import tsx bench/audio.ts`
 *  (a) one job's conversion through prepare() against the bare ffmpeg command line, same file, same run;
 *  (b) one recording sent to 1,000 recipients: 1,000 prepare() calls on one URL.
 * Writes its section of BENCHMARKS.md (between <!-- bench:audio:start --> and <!-- bench:audio:end -->).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createAudioPipeline, resolveFfmpegPath, type PreparedAudio } from '../src/audio/index.js';
import { startAudioServer } from '../test/fakes/audio-server.js';
import { commandLine, machineDescription, writeSection } from './report.js';
import { audioTargetFor } from '../src/platforms/registry.js';
type VoicePlatform = 'linkedin' | 'telegram' | 'whatsapp';

const run = promisify(execFile);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 15);
const RECIPIENTS = 1000;
const RECIPIENT_CONCURRENCY = 50;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] as number;
};
const ms = (x: number): string => `${x.toFixed(1)} ms`;

const RAW_ARGS: Record<VoicePlatform, string[]> = {
  // The encode the WhatsApp profile starts from (prepare() then repacks it in TypeScript).
  whatsapp: ['-c:a', 'libopus', '-b:a', '16k', '-ac', '1', '-ar', '16000', '-application', 'voip', '-frame_duration', '20', '-f', 'ogg'],
  telegram: ['-c:a', 'libopus', '-b:a', '32k', '-ac', '1', '-ar', '48000', '-application', 'voip', '-f', 'ogg'],
  linkedin: ['-c:a', 'aac', '-b:a', '64k', '-ac', '1', '-movflags', '+faststart', '-f', 'ipod'],
};

async function main(): Promise<void> {
  const ffmpegPath = resolveFfmpegPath(process.env.FFMPEG_PATH);
  const work = await mkdtemp(join(tmpdir(), 'voicenote-bench-audio-'));
  const source = join(work, 'voice-60s.mp3');
  // A 60 s stereo 128 kb/s MP3, the typical voice-note upload: a tone plus pink noise so encoders work for real.
  await run(ffmpegPath, [
    '-hide_banner', '-nostdin', '-y',
    '-f', 'lavfi', '-i', 'sine=frequency=220:sample_rate=44100:duration=60',
    '-f', 'lavfi', '-i', 'anoisesrc=d=60:c=pink:r=44100:a=0.1',
    '-filter_complex', '[0:a][1:a]amix=inputs=2,aformat=channel_layouts=stereo[out]', '-map', '[out]',
    '-c:a', 'libmp3lame', '-b:a', '128k', source,
  ]);
  const sourceBytes = (await stat(source)).size;
  const server = await startAudioServer();
  server.route('/voice.mp3', { kind: 'file', path: source, contentType: 'audio/mpeg' });
  const url = server.url('/voice.mp3');

  const rawOnce = async (platform: VoicePlatform): Promise<number> => {
    const out = join(work, `raw-${platform}.out`);
    const t = performance.now();
    await run(ffmpegPath, ['-nostdin', '-y', '-i', source, '-vn', ...RAW_ARGS[platform], out]);
    const took = performance.now() - t;
    await rm(out, { force: true });
    return took;
  };
  const oursOnce = async (platform: VoicePlatform): Promise<number> => {
    const dataDir = await mkdtemp(join(work, 'data-'));
    const pipeline = createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true });
    const t = performance.now();
    const a = await pipeline.prepare({ url, target: audioTargetFor(platform) });
    const took = performance.now() - t;
    if (a.cacheHit) throw new Error('fresh cache expected');
    a.release();
    await pipeline.close();
    await rm(dataDir, { recursive: true, force: true });
    return took;
  };

  const perJob: Array<{ platform: VoicePlatform; raw: number[]; ours: number[] }> = [];
  for (const platform of ['whatsapp', 'linkedin'] as const) {
    await rawOnce(platform);
    await oursOnce(platform); // warm-up: page cache, JIT
    const raw: number[] = [];
    const ours: number[] = [];
    for (let i = 0; i < ITERATIONS; i++) {
      // Interleaved so drift in machine load hits both sides alike.
      raw.push(await rawOnce(platform));
      ours.push(await oursOnce(platform));
    }
    perJob.push({ platform, raw, ours });
    console.log(platform, 'raw', ms(median(raw)), 'ours', ms(median(ours)));
  }

  // (b) 1,000 recipients of one recording.
  const dataDir = await mkdtemp(join(work, 'fanout-'));
  let conversions = 0;
  const pipeline = createAudioPipeline({
    dataDir,
    ffmpegPath,
    allowPrivateUrls: true,
    logger: {
      debug: (_obj, msg) => {
        if (msg === 'audio converted') conversions++;
      },
      warn: () => undefined,
    },
  });
  const latencies: number[] = [];
  let hits = 0;
  let next = 0;
  const fanStart = performance.now();
  await Promise.all(
    Array.from({ length: RECIPIENT_CONCURRENCY }, async () => {
      while (next < RECIPIENTS) {
        next++;
        const t = performance.now();
        const a: PreparedAudio = await pipeline.prepare({ url, target: audioTargetFor('whatsapp') });
        latencies.push(performance.now() - t);
        if (a.cacheHit) hits++;
        a.release();
      }
    }),
  );
  const fanTotal = performance.now() - fanStart;
  await pipeline.close();
  await server.close();
  await rm(work, { recursive: true, force: true });

  const sh = (cmd: string, args: string[]): string => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8' }).trimEnd();
    } catch {
      return 'n/a';
    }
  };
  const ffVersion = sh(ffmpegPath, ['-version']).split('\n')[0] ?? '';
  const rows = perJob.map(({ platform, raw, ours }) => {
    const r = median(raw);
    const o = median(ours);
    return `| ${platform} (${platform === 'linkedin' ? 'AAC 64k M4A' : 'Opus 16 kHz 16k OGG, push-to-talk'}) | ${ms(r)} | ${ms(o)} | ${ms(o - r)} | ${(((o - r) / r) * 100).toFixed(1)} % | ${ms(pct(raw, 90))} / ${ms(pct(ours, 90))} |`;
  });

  const report = `## Audio pipeline

Measured ${new Date().toISOString()} with \`${commandLine('node --import tsx bench/audio.ts')}\` (source: \`bench/audio.ts\`).

${machineDescription()}

ffmpeg: \`${ffVersion}\` (${ffmpegPath.includes('@ffmpeg-installer') ? 'bundled @ffmpeg-installer build' : ffmpegPath}).

Source: a 60 s stereo 44.1 kHz 128 kb/s MP3 (${(sourceBytes / 1024).toFixed(0)} KiB), served over HTTP on loopback.

### (a) One job: \`prepare()\` against the bare ffmpeg command line

Medians of ${ITERATIONS} interleaved runs per side. "Raw" is \`ffmpeg -nostdin -y -i voice.mp3 -vn <target args> out\` spawned
from Node and timed to exit. "Ours" is one \`prepare()\` on a fresh cache directory: HTTP download with SSRF-checked
connect, streaming SHA-256, container/codec detection (music-metadata), one ffmpeg run that encodes the target and decodes
8 kHz PCM for the 64-bar waveform in the same pass, for WhatsApp the repacking into its push-to-talk profile (three frames
a packet, new pages and headers, in TypeScript), atomic move into the cache, JSON record.

| target | raw ffmpeg (median) | prepare() (median) | overhead | overhead % | p90 raw / ours |
|---|---|---|---|---|---|
${rows.join('\n')}

Aim: overhead within 15 %.

### (b) One recording sent to ${RECIPIENTS.toLocaleString('en-US')} recipients

${RECIPIENTS.toLocaleString('en-US')} \`prepare({ url, platform: 'whatsapp' })\` calls on one URL, ${RECIPIENT_CONCURRENCY} at a time, fresh cache.
Every call still downloads and hashes the source (the cache is keyed by content, not URL); the conversion is shared.

| conversions run | cache hits | joined the in-flight conversion | total time | per call p50 / p99 |
|---|---|---|---|---|
| ${conversions} | ${hits} | ${RECIPIENTS - hits} | ${ms(fanTotal)} | ${ms(pct(latencies, 50))} / ${ms(pct(latencies, 99))} |

Aim: one conversion, the rest cache hits (or waiting on that one conversion).
`;
  console.log(report);
  await writeSection('audio', report);
}

await main();
