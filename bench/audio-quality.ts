/**
 * Encoder settings chosen by measurement: `node --import tsx bench/audio-quality.ts`
 * For a handful of speech sources (espeak-ng voices, and the synthetic speech-like buzz the tests use),
 * at each libopus complexity (0–10), for the WhatsApp push-to-talk encode and the Telegram encode, with
 * each of the two encoders the service has: the ffmpeg in use (its libopus), and the in-process libopus
 * binding fed by an ffmpeg that only decodes (src/audio/pcm-encode.ts, as the pipeline runs it). For
 * each: the encode's CPU time per audio-minute, and the log-spectral distance (LSD, dB) of
 * the decoded note to the source, both at 16 kHz (0–8 kHz, the band both notes carry), speech frames
 * only. Lower LSD = closer to the source. Also the share of WhatsApp frames that are not SILK wideband
 * (TOC config 9): the profile must stay exact at the chosen complexity.
 * Needs `espeak-ng` on PATH (Debian: `apt-get install espeak-ng`).
 * Writes its section of BENCHMARKS.md (between <!-- bench:audio-quality:start --> and …:end -->).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { resolveFfmpegPath } from '../src/audio/index.js';
import { parseOpusPacket, readOggOpus } from '../src/audio/ogg-opus.js';
import { EncoderProcesses } from '../src/audio/encoder-processes.js';
import { loadNativeOpus, OPUS_BINDING } from '../src/audio/opus-encoder.js';
import { SPEECH_LIKE_FILTER } from '../src/audio/speech-like.js';
import { childrenCpuSeconds, processCpuSeconds } from './cpu-time.js';
import { commandLine, machineDescription, writeSection } from './report.js';

const run = promisify(execFile);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const ROUNDS = Math.max(2, Number(process.env.BENCH_ROUNDS ?? 3));
const COMPLEXITIES = (process.env.BENCH_COMPLEXITIES ?? '0,2,4,5,6,8,10').split(',').map(Number);
const NATIVE_COMPLEXITIES = (process.env.BENCH_NATIVE_COMPLEXITIES ?? '0,1,2,3,4,5,6,8,10').split(',').map(Number);
/** `ffmpeg`, `native` or both (the default). */
const ENCODERS = (process.env.BENCH_ENCODERS ?? 'ffmpeg,native').split(',') as Encoder[];
type Encoder = 'ffmpeg' | 'native';
const TEXT =
  'Hello Maria, this is Tom from Acme. I saw your post about scaling outbound sales, and I wanted to share a short idea. ' +
  'We help teams like yours book more meetings without adding headcount: forty-two companies last quarter, from Lisbon to Seoul. ' +
  'Would you be open to a quick call next week? Thursday afternoon works well for me, or Friday at nine. Talk soon!';
/** espeak-ng voices: two male, two female (variants), one Scottish accent. */
const VOICES = ['en-us', 'en-gb', 'en-us+f3', 'en-gb+f4', 'en-gb-scotland'];

const PROFILES = {
  whatsapp: (c: number) => ['-c:a', 'libopus', '-compression_level', String(c), '-b:a', '16k', '-ac', '1', '-ar', '16000', '-application', 'voip', '-frame_duration', '20', '-f', 'ogg'],
  telegram: (c: number) => ['-c:a', 'libopus', '-compression_level', String(c), '-b:a', '32k', '-ac', '1', '-ar', '48000', '-application', 'voip', '-f', 'ogg'],
} as const;
type Profile = keyof typeof PROFILES;
/** The in-process encode's settings per profile: the ffmpeg arguments above, for the binding. */
const NATIVE = { whatsapp: { profile: 'ogg_opus_ptt', rate: 16000, kbps: 16 }, telegram: { profile: 'ogg_opus', rate: 48000, kbps: 32 } } as const;

/**
 * The pipeline's libopus encode of one source: ffmpeg decodes to mono 16-bit PCM at the encoder's
 * rate (as src/audio/transcode.ts asks it to), encoded in an encoder process that writes `out`.
 */
async function encodeNative(ffmpegPath: string, encoders: EncoderProcesses, path: string, out: string, profile: Profile, complexity: number): Promise<void> {
  const s = NATIVE[profile];
  const args = ['-nostdin', '-v', 'error', '-i', path, '-map', '0:a:0', '-ac', '1', '-rematrix_maxval', '1', '-ar', String(s.rate), '-c:a', 'pcm_s16le', '-flush_packets', '0', '-f', 's16le', 'pipe:1'];
  const reply = await encoders.encode({ ffmpegPath, args, withWave: false, timeoutMs: 600_000, profile: s.profile, kbps: s.kbps, complexity, outputPath: out });
  if (reply.exitCode !== 0 || reply.bytes === undefined) throw new Error(`the encode failed: ${reply.encodeError ?? reply.stderr}`);
}

async function pcm16k(ffmpegPath: string, path: string): Promise<Float32Array> {
  const { stdout } = await run(ffmpegPath, ['-nostdin', '-v', 'error', '-i', path, '-ac', '1', '-ar', '16000', '-f', 'f32le', 'pipe:1'], {
    encoding: 'buffer',
    maxBuffer: 512 * 1024 * 1024,
  });
  return new Float32Array(stdout.buffer, stdout.byteOffset, stdout.length / 4);
}

/** In-place radix-2 FFT of (re, im), length a power of two. */
function fft(re: Float64Array, im: Float64Array): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j]!, re[i]!];
      [im[i], im[j]] = [im[j]!, im[i]!];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = (-2 * Math.PI) / len;
    for (let i = 0; i < n; i += len) {
      for (let k = 0; k < len / 2; k++) {
        const wr = Math.cos(ang * k);
        const wi = Math.sin(ang * k);
        const a = i + k;
        const b = a + len / 2;
        const xr = re[b]! * wr - im[b]! * wi;
        const xi = re[b]! * wi + im[b]! * wr;
        re[b] = re[a]! - xr;
        im[b] = im[a]! - xi;
        re[a] = re[a]! + xr;
        im[a] = im[a]! + xi;
      }
    }
  }
}

const N = 512;
const HOP = 256;
const HANN = Float64Array.from({ length: N }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / N));

function powerSpectrum(x: Float32Array, at: number): Float64Array {
  const re = new Float64Array(N);
  const im = new Float64Array(N);
  for (let i = 0; i < N; i++) re[i] = (x[at + i] ?? 0) * HANN[i]!;
  fft(re, im);
  const p = new Float64Array(N / 2);
  for (let k = 1; k <= N / 2; k++) p[k - 1] = re[k]! * re[k]! + im[k]! * im[k]!;
  return p;
}

/** The lag (samples, within ±max) at which `out` best matches `ref`, from the correlation of the first 10 s. */
function bestLag(ref: Float32Array, out: Float32Array, max = 400): number {
  const len = Math.min(ref.length, out.length, 16000 * 10) - max;
  let best = 0;
  let bestScore = -Infinity;
  for (let lag = -max; lag <= max; lag++) {
    let s = 0;
    for (let i = max; i < len; i++) s += ref[i]! * (out[i + lag] ?? 0);
    if (s > bestScore) {
      bestScore = s;
      best = lag;
    }
  }
  return best;
}

/**
 * Mean log-spectral distance (dB) over the frames whose source energy is within 40 dB of the loudest.
 * Both spectra are floored 60 dB under the source's loudest bin, so inaudible detail (a synthetic
 * source's empty bins against the codec's noise) does not dominate.
 */
export function logSpectralDistance(ref: Float32Array, out: Float32Array): number {
  const lag = bestLag(ref, out);
  const pairs: Array<[Float64Array, Float64Array]> = [];
  for (let at = Math.max(0, -lag); at + N <= ref.length && at + lag + N <= out.length; at += HOP) {
    pairs.push([powerSpectrum(ref, at), powerSpectrum(out, at + lag)]);
  }
  const energy = pairs.map(([p]) => p.reduce((a, b) => a + b, 0));
  const loudest = Math.max(...energy);
  const floor = Math.max(...pairs.map(([p]) => Math.max(...p))) * 1e-6;
  let total = 0;
  let frames = 0;
  pairs.forEach(([p, q], i) => {
    if (energy[i]! < loudest * 1e-4) return;
    let sum = 0;
    for (let k = 0; k < p.length; k++) {
      const diff = 10 * Math.log10(Math.max(p[k]!, floor)) - 10 * Math.log10(Math.max(q[k]!, floor));
      sum += diff * diff;
    }
    total += Math.sqrt(sum / p.length);
    frames++;
  });
  return total / frames;
}

function notSilkWideband(file: Buffer): number {
  let total = 0;
  let other = 0;
  for (const packet of readOggOpus(file).packets) {
    const p = parseOpusPacket(packet);
    total += p.frames.length;
    if (p.config !== 9 || p.stereo) other += p.frames.length;
  }
  return other / total;
}

async function main(): Promise<void> {
  const ffmpegPath = resolveFfmpegPath(process.env.FFMPEG_PATH);
  const work = await mkdtemp(join(tmpdir(), 'voicenote-bench-quality-'));
  const text = Array.from({ length: 4 }, () => TEXT).join(' ');
  const sources: Array<{ name: string; path: string }> = [];
  for (const voice of VOICES) {
    const wav = join(work, `${voice}.espeak.wav`);
    execFileSync('espeak-ng', ['-v', voice, '-s', '160', '-w', wav, text]);
    // The upload: 44.1 kHz stereo PCM, both channels the voice at a peak of −1 dBFS (lossless, so the
    // source is the reference).
    const path = join(work, `${voice}.wav`);
    await run(ffmpegPath, ['-nostdin', '-v', 'error', '-y', '-i', wav, '-t', String(SECONDS), '-af', 'volume=0.5', '-ar', '44100', '-ac', '2', '-c:a', 'pcm_s16le', path]);
    sources.push({ name: `espeak-ng ${voice}`, path });
  }
  const synthetic = join(work, 'speech-like.wav');
  await run(ffmpegPath, ['-nostdin', '-v', 'error', '-y', '-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(SECONDS, 44100), '-ac', '2', '-c:a', 'pcm_s16le', synthetic]);
  sources.push({ name: 'speech-like buzz (test filter)', path: synthetic });
  const refs = await Promise.all(sources.map((s) => pcm16k(ffmpegPath, s.path)));
  const minutes = (sources.length * SECONDS) / 60;

  // The decode floor: ffmpeg decoding the same sources and nothing else.
  const floorRuns: number[] = [];
  for (let i = 0; i < 3; i++) {
    const before = childrenCpuSeconds();
    for (const s of sources) await run(ffmpegPath, ['-nostdin', '-v', 'error', '-i', s.path, '-f', 'null', '-']);
    floorRuns.push((childrenCpuSeconds() - before) / minutes);
  }

  type Row = { profile: Profile; encoder: Encoder; c: number; cpu: number[]; lsd: number[]; other: number };
  const rows: Row[] = [];
  const native = ENCODERS.includes('native') ? loadNativeOpus() : null;
  for (const profile of Object.keys(PROFILES) as Profile[]) {
    if (ENCODERS.includes('ffmpeg')) for (const c of COMPLEXITIES) rows.push({ profile, encoder: 'ffmpeg', c, cpu: [], lsd: [], other: 0 });
    if (native) for (const c of NATIVE_COMPLEXITIES) rows.push({ profile, encoder: 'native', c, cpu: [], lsd: [], other: 0 });
  }
  const out = join(work, 'out.ogg');
  // Three rounds, complexities interleaved within each, so drift in the machine's load hits all alike.
  for (let round = 0; round < ROUNDS; round++) {
    for (const row of rows) {
      const before = childrenCpuSeconds() + processCpuSeconds();
      // One encoder process at this process's own priority (the bench measures CPU, not who gets it
      // first), ended before the CPU is read: a child's CPU counts once it has exited.
      const encoders = native ? new EncoderProcesses({ module: OPUS_BINDING, name: native.name, processes: 1, niceness: 0 }) : null;
      for (const [i, s] of sources.entries()) {
        if (row.encoder === 'native') await encodeNative(ffmpegPath, encoders!, s.path, out, row.profile, row.c);
        else await run(ffmpegPath, ['-nostdin', '-v', 'error', '-y', '-i', s.path, ...PROFILES[row.profile](row.c), out]);
        if (round === 0) {
          const file = await readFile(out);
          row.lsd.push(logSpectralDistance(refs[i]!, await pcm16k(ffmpegPath, out)));
          if (row.profile === 'whatsapp') row.other = Math.max(row.other, notSilkWideband(file));
        }
      }
      await encoders?.close();
      // The quality decodes and measures above are children and this process too: count only rounds 1–2
      // for the CPU. This process's own CPU is the in-process encoder's (and reading its pipe).
      if (round > 0) row.cpu.push((childrenCpuSeconds() + processCpuSeconds() - before) / minutes);
    }
    console.log('round', round + 1, 'done');
  }
  await rm(work, { recursive: true, force: true });

  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const floor = median(floorRuns);
  const table = rows.map((r) => {
    const cpu = r.cpu.reduce((a, b) => a + b, 0) / r.cpu.length;
    const mean = r.lsd.reduce((a, b) => a + b, 0) / r.lsd.length;
    const worst = Math.max(...r.lsd);
    const other = r.profile === 'whatsapp' ? `${(r.other * 100).toFixed(1)} %` : '–';
    return `| ${r.profile} | ${r.encoder === 'native' ? 'in-process' : 'ffmpeg'} | ${r.c} | ${cpu.toFixed(2)} s (${Math.min(...r.cpu).toFixed(2)}–${Math.max(...r.cpu).toFixed(2)}) | ${(cpu / floor).toFixed(1)}× | ${mean.toFixed(2)} dB | ${worst.toFixed(2)} dB | ${other} |`;
  });
  const ffVersion = execFileSync(ffmpegPath, ['-version'], { encoding: 'utf8' }).split('\n')[0] ?? '';
  const report = `## Audio quality and encoder cost by libopus complexity

Measured ${new Date().toISOString()} with \`${commandLine('node --import tsx bench/audio-quality.ts')}\` (source: \`bench/audio-quality.ts\`).

${machineDescription()}

ffmpeg: \`${ffVersion}\` (${ffmpegPath.includes('@ffmpeg-installer') ? 'bundled @ffmpeg-installer build' : ffmpegPath}).

In-process encoder: ${native ? `\`${native.name}\` (libopus 1.3.1 built from its bundled source at install)` : 'not measured'}.

Sources: ${sources.length} × ${SECONDS} s of speech, 44.1 kHz stereo PCM WAV (${sources.map((s) => s.name).join(', ')}).
Encoders: "ffmpeg" = the ffmpeg above encoding with its libopus (the fallback path); "in-process" = that ffmpeg only decoding,
downmixing and resampling to 16-bit PCM on a pipe, encoded in this process by the binding (the service's path), with the
same settings (VoIP, unconstrained VBR, 20 ms frames; WhatsApp 16 kHz 16 kb/s, Telegram 48 kHz 32 kb/s).
CPU: user + system time per audio-minute of the encode (ffmpeg decoding the WAV, resampling, encoding; for in-process, ffmpeg's
and this process's), mean of ${ROUNDS - 1}
interleaved rounds (the first round measures quality and is not counted); the decode floor (ffmpeg decoding the same sources to nothing) is ${floor.toFixed(3)} s per audio-minute
(clock ticks are 10 ms: the floor is only good to about ±${((0.01 * sources.length) / minutes).toFixed(2)} s).
Quality: log-spectral distance of the decoded note to the source at 16 kHz (512-sample Hann frames, speech frames only:
within 40 dB of the loudest), mean and worst of the sources; lower is closer. "Not SILK WB": frames of the WhatsApp
encode that are not TOC config 9 (the repacker refuses those and encodes again at a lower bitrate).

| profile | encoder | complexity | CPU per audio-minute (range) | × decode floor | LSD mean | LSD worst source | not SILK WB |
|---|---|---|---|---|---|---|---|
${table.join('\n')}
`;
  console.log(report);
  await writeSection('audio-quality', report);
}

await main();
