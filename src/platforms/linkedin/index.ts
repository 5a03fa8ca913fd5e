import { hash } from 'node:crypto';
import { M4A_AAC_VOICE, MiB } from '../../audio/targets.js';
import type { PlatformDefinition, PlatformServices } from '../platform.js';
import { createLinkedinAdapter, type LinkedinAdapter, type LinkedinPace } from './adapter.js';
import { linkedinRestFor, listenTuningOf, recordSentConversation } from './listen-setup.js';
import { checkLinkedinRecipient, checkLinkedinSession, LINKEDIN_SESSION_FIELDS, type LinkedinSession } from './rules.js';

/** Tests' timings: the pace between two deliveries of one account, and optionally the per-call timeout. */
export type LinkedinTuning = LinkedinPace & { timeoutMs?: number };

const isTuning = (value: unknown): value is LinkedinTuning =>
  typeof value === 'object' && value !== null && typeof (value as LinkedinPace).minMs === 'number' && typeof (value as LinkedinPace).maxMs === 'number';

const CHECK_TIMEOUT_MS = 30_000;

/** One adapter per process for recipient checks (its pace and rest are per li_at, as the sends'). */
const checkers = new WeakMap<PlatformServices, LinkedinAdapter>();
function checkerOf(services: PlatformServices): LinkedinAdapter {
  let checker = checkers.get(services);
  if (!checker) {
    checker = createLinkedinAdapter({ apiRoot: services.config.linkedinApiRoot, rest: linkedinRestFor(services) });
    checkers.set(services, checker);
  }
  return checker;
}

/** LinkedIn through Voyager, the API of linkedin.com's own web app, with the user's session cookie. */
export const linkedin: PlatformDefinition = {
  name: 'linkedin',
  // M4A (AAC), at most 60 seconds; kept under 10 MB.
  audio: { ...M4A_AAC_VOICE, maxBytes: 10 * MiB, maxDurationSeconds: 60 },
  maxCaptionLength: null,
  // user_agent and cookies: the browser the cookie came from, and its other cookies.
  sessionFields: LINKEDIN_SESSION_FIELDS,
  checkRecipient: checkLinkedinRecipient,
  checkSession: checkLinkedinSession,
  // No "recording…" indicator on LinkedIn: `recording_indicator: true` is refused at accept time.
  recordingIndicator: false,
  // The member's cookie, by a hash of li_at (never the cookie).
  senderKey: (session) => hash('sha256', String(session.li_at), 'base64url').slice(0, 22),
  senderKind: () => 'linkedin_cookie',
  // Resolved as a send resolves it (the mailbox, then the profile), by an adapter of the process's own.
  recipientExists: ({ session, recipient, proxy }, services) =>
    checkerOf(services).recipientExists(session as unknown as LinkedinSession, recipient, AbortSignal.timeout(CHECK_TIMEOUT_MS), proxy),
  createLiveAdapter: ({ services, tuning }) => {
    const own = isTuning(tuning.linkedin) ? tuning.linkedin : undefined;
    return createLinkedinAdapter({
      apiRoot: services.config.linkedinApiRoot,
      ...(own ? { pace: { minMs: own.minMs, maxMs: own.maxMs } } : {}),
      ...(own?.timeoutMs !== undefined ? { timeoutMs: own.timeoutMs } : {}),
      // An account refused as automated (999) rests in every process when Redis is configured; its looks (listening) too.
      rest: linkedinRestFor(services),
      onSent: recordSentConversation(services, listenTuningOf(tuning)),
    });
  },
};
