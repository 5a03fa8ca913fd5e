export type AudioErrorCode =
  | 'audio_fetch_failed'
  | 'audio_fetch_blocked'
  | 'audio_too_large'
  | 'audio_too_long'
  | 'audio_unsupported';

export class AudioError extends Error {
  readonly code: AudioErrorCode;
  /** Only failures that may succeed later (network errors, timeouts, 5xx/429 from the audio host). */
  readonly transient: boolean;

  constructor(code: AudioErrorCode, message: string, opts?: { transient?: boolean; cause?: unknown }) {
    super(message, opts?.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AudioError';
    this.code = code;
    this.transient = opts?.transient ?? false;
  }
}

export function isAudioError(err: unknown): err is AudioError {
  return err instanceof AudioError;
}
