/**
 * What every platform's send rules share: the shape of a violation (the route turns it into a 422
 * `invalid_parameter` naming the field) and the checks that read a platform's own limits.
 * Each platform's recipient and session rules live in its own folder (`<name>/rules.ts`).
 */
import type { AudioTarget } from '../audio/targets.js';

export interface Violation {
  field: string;
  message: string;
}

export const isViolation = <T>(value: T | Violation): value is Violation =>
  typeof value === 'object' && value !== null && 'field' in value && 'message' in value && !('platform' in value);

/** A required string field of the send's `session` object. */
export function stringField(session: Record<string, unknown>, name: string): string | Violation {
  const value = session[name];
  if (value === undefined || value === null || value === '') {
    return { field: `session.${name}`, message: `session.${name} is required for this platform` };
  }
  if (typeof value !== 'string') return { field: `session.${name}`, message: `session.${name} must be a string` };
  return value;
}

export function checkDuration(platform: { name: string; audio: AudioTarget }, duration: number): Violation | null {
  if (!Number.isFinite(duration) || duration <= 0) return { field: 'duration', message: 'duration must be a positive number of seconds' };
  const max = platform.audio.maxDurationSeconds;
  if (max !== null && duration > max) return { field: 'duration', message: `duration must be at most ${max} seconds on ${platform.name}` };
  return null;
}

export function checkCaption(platform: { name: string; maxCaptionLength: number | null }, caption: string): Violation | null {
  if (platform.maxCaptionLength === null) return { field: 'caption', message: `caption does not apply to ${platform.name}` };
  if (caption.length > platform.maxCaptionLength) {
    return { field: 'caption', message: `caption must be at most ${platform.maxCaptionLength} characters` };
  }
  return null;
}
