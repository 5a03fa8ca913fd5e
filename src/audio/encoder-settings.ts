/**
 * Settings every encode shares (docs/how-it-works.md, "Audio"; the measurements in BENCHMARKS.md).
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
 * on the same measurement made with that encoder (bench/audio-quality.ts, "in-process" rows; the
 * whole note's cost in bench/audio-cpu.ts). WhatsApp (16 kHz): 5, the knee again (4 encodes like 5;
 * 3 saves a fifth of the encode and loses 0.4 dB). Telegram (48 kHz, SILK + CELT): 5 put the whole
 * note at 11× the decode floor; below 4 (where SILK's warped noise shaping starts, the one step worth
 * 0.26 dB) the distance hardly moves: 4.20 dB at 3, 4.23 at 2 and 1, 4.26 at 0, against 3.94 at 5;
 * 1 costs 0.20 s an audio-minute to encode against 0.28 at 3 and 0.33 at 5. libopus's own rate
 * model counts complexity 0–1 (SILK without delayed decision) as about a fifth less efficient, which
 * this measure does not see.
 */
export const NATIVE_OPUS_COMPLEXITY = { ogg_opus_ptt: 5, ogg_opus: 1 } as const;
