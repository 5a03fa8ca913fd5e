/**
 * Settings every encode shares (README, "Audio"; the measurements in BENCHMARKS.md).
 *
 * Mono without clipping: ffmpeg's stereo-to-mono matrix adds both channels at 0.707 (−3 dB each) and,
 * when the encoder takes float samples (libopus, AAC), does not normalise it, so a loud stereo source
 * came out 3 dB louder than either channel and clipped. `rematrix_maxval=1` scales the matrix so that
 * the mono signal never exceeds the louder channel (stereo: 0.5·L + 0.5·R; a mono source is untouched).
 */
export const MONO_WITHOUT_CLIPPING = ['-ac', '1', '-rematrix_maxval', '1'] as const;

/**
 * libopus complexity (0–10; ffmpeg's `-compression_level`, default 10). Measured on speech with the
 * bundled ffmpeg (bench/audio-quality.ts, BENCHMARKS.md "Audio quality and encoder cost by libopus
 * complexity"): 5 is the knee. It costs half the encoder CPU of 10 (which encodes like 8) for a
 * log-spectral distance to the source 0.2–0.25 dB higher; 2 and below save a third more CPU but lose
 * twice that again (4 encodes like 5).
 */
export const OPUS_COMPLEXITY = 5;
export const OPUS_ENCODER = ['-c:a', 'libopus', '-compression_level', String(OPUS_COMPLEXITY)] as const;

/**
 * libopus complexity of the in-process encoder (opus-encoder.ts, libopus 1.3.1), per profile, chosen
 * on the same measurement made with that encoder (bench/audio-quality.ts, "in-process" rows).
 */
export const NATIVE_OPUS_COMPLEXITY = { ogg_opus_ptt: 5, ogg_opus: 3 } as const;
