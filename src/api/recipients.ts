import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { isViolation, type Violation } from '../platforms/rules.js';
import { sandboxRecipientExists } from '../platforms/sandbox/adapter.js';
import type { RecipientCheck } from '../platforms/platform.js';
import type { Services } from '../services.js';
import { RECIPIENT_CHECK_DAILY_BUDGET, takeRecipientCheck } from '../store/recipient-check-budget.js';
import { findRecipientCheck, saveRecipientCheck, type RecipientCheckRow } from '../store/recipient-checks.js';
import { senderProxyUrl, UnreadableProxy } from '../platforms/proxy/sender-proxy-url.js';
import { ProxyFailure } from '../platforms/proxy/tunnel.js';
import { isFresh, keptAnswer } from './kept-recipient-checks.js';
import { findSenderByRef } from '../store/senders.js';
import { findSuppression } from '../store/suppressions.js';
import { ApiError, invalidParameter, invalidRequest } from './errors.js';
import { checkKeySender } from './key-senders.js';
import { withErrors } from './schemas.js';
import { rejectUnknownFields } from './unknown-fields.js';
import { knownPlatform } from './send.js';

const fail = (violation: Violation): ApiError => invalidParameter(violation.field, violation.message);

/** 429 in the error envelope, with when the sender's budget is whole again. */
function overBudget(resetsAt: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil((resetsAt - Date.now()) / 1000));
  return new ApiError(
    'rate_limited',
    `this sender has asked the platform about ${RECIPIENT_CHECK_DAILY_BUDGET} recipients today (UTC), its daily budget of recipient checks; it resets at ${new Date(resetsAt).toISOString()}`,
    { daily_budget: RECIPIENT_CHECK_DAILY_BUDGET, resets_at: new Date(resetsAt).toISOString() },
    { 'Retry-After': String(retryAfter) },
  );
}

const CHECK_FIELDS = ['platform', 'recipient', 'session'];

export const CheckBody = Type.Object({
  platform: Type.String({ description: 'linkedin, telegram or whatsapp' }),
  recipient: Type.String({ description: 'As POST /send takes it' }),
  session: Type.Object({}, { additionalProperties: true, description: 'As POST /send takes it: li_at + csrf_token, bot_token, or session_id' }),
});
const CheckAnswer = Type.Object({
  platform: Type.String(),
  recipient: Type.String(),
  exists: Type.Union([Type.Boolean(), Type.Null()], { description: 'null: the platform did not say (it is down, the sender is resting, or it is not asked)' }),
  reason: Type.Union([Type.String(), Type.Null()], { description: 'Why it does not exist, or why the platform did not say' }),
  suppressed: Type.Boolean({ description: "The recipient is on the account's suppression list for this platform (or every platform): a send to them is refused" }),
});

/**
 * POST /recipients/check (docs/senders.md, "Recipients checked"): asks the platform, as the sender, whether a
 * recipient exists, before any note goes. Read bucket. Sandbox keys: recipients ending in 7 do not exist.
 */
export function registerRecipientCheckRoute(app: FastifyInstance, services: Services): void {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/recipients/check',
    {
      config: { scope: 'send' },
      schema: {
        summary: 'Ask the platform whether a recipient exists for a sender',
        description: 'WhatsApp asks the session (onWhatsApp); a Telegram bot asks getChat (a bot reaches only users who started it). exists null: the platform did not say.',
        tags: ['senders'],
        body: CheckBody,
        response: { 200: CheckAnswer, ...withErrors(400, 415, 422, 429) },
      },
      // As POST /send: an unknown field, then an unknown platform, before the schema's "is required".
      preValidation: async (request) => {
        const body = request.body as Record<string, unknown> | null | undefined;
        rejectUnknownFields(body, CHECK_FIELDS);
        if (typeof body?.platform === 'string') knownPlatform(services, body.platform);
      },
    },
    async (request) => {
      const caller = request.caller!;
      const body = request.body;
      const platform = knownPlatform(services, body.platform);
      const recipientProblem = platform.checkRecipient(body.recipient);
      if (recipientProblem) throw fail(recipientProblem);
      const session = platform.checkSession(body.session as Record<string, unknown>);
      if (isViolation(session)) throw fail(session);
      if (platform.sessionFields) rejectUnknownFields(body.session, platform.sessionFields, 'session.');
      await checkKeySender(services, caller, platform, session);
      const owner = { accountId: caller.accountId, env: caller.env };
      if (platform.checkAtAccept) {
        const problem = await platform.checkAtAccept(session, owner, services);
        if (problem) throw new ApiError(problem.code, problem.message, problem.details);
      }
      const suppressed = (await findSuppression(services.db.kysely, owner, platform.name, body.recipient)) !== undefined;
      const answer = (check: RecipientCheck) => ({ platform: platform.name, recipient: body.recipient, exists: check.exists, reason: check.reason, suppressed });
      if (caller.env === 'test') {
        return answer(sandboxRecipientExists(body.recipient) ? { exists: true, reason: null } : { exists: false, reason: 'sandbox: recipients ending in 7 do not exist' });
      }
      // A sender that may not ask now is not made to: the platform did not say.
      const senderKey = platform.senderKey?.(session);
      const sender = senderKey ? await findSenderByRef(services.db.kysely, { ...owner, platform: platform.name, senderKey }) : undefined;
      const until = sender?.until == null ? null : Number(sender.until);
      if (sender?.status === 'expired') return answer({ exists: null, reason: `the sender has expired: ${sender.reason ?? 'its credential no longer works'}` });
      if (sender?.status === 'resting' && (until === null || until > Date.now())) {
        return answer({ exists: null, reason: `the sender is resting${until !== null ? ` until ${new Date(until).toISOString()}` : ''}` });
      }
      if (!platform.recipientExists) return answer({ exists: null, reason: `${platform.name} is not asked ahead: the send itself resolves the recipient` });
      // Asked through the sender's proxy, as its sends are (docs/proxies.md).
      const proxy = await senderProxyUrl(
        { db: services.db.kysely, secretBox: services.secretBox, outboundProxy: services.config.outboundProxy, allowPrivate: services.config.audioAllowPrivateUrls },
        senderKey ? { ...owner, platform: platform.name, senderKey } : { platform: platform.name, senderKey: '' },
      ).catch((error: unknown) =>
        // Its own words only when they are ours (they name the proxy by scheme, host and port); nothing else of a failure is told.
        error instanceof UnreadableProxy || error instanceof ProxyFailure ? error : new Error("the sender's proxy cannot be used right now"),
      );
      if (proxy instanceof Error) return answer({ exists: null, reason: proxy.message });
      if (!senderKey) return answer(await platform.recipientExists({ session, recipient: body.recipient, owner, proxy }, services));
      // Every live check asks the platform as the sender, and bulk lookups get senders banned: a fresh
      // kept answer is given again, and the others count under the sender's daily budget.
      const db = services.db.kysely;
      const kept = await findRecipientCheck(db, senderKey, body.recipient);
      if (kept && isFresh(kept)) return answer(keptAnswer(body.recipient, kept));
      const taken = await takeRecipientCheck(db, { ...owner, platform: platform.name, senderKey, kind: platform.senderKind?.(senderKey) ?? platform.name });
      if (!taken.ok) throw overBudget(taken.resetsAt);
      const check = await platform.recipientExists({ session, recipient: body.recipient, owner, proxy }, services);
      // Kept for the next check (a platform that keeps its own answer, with its address, has written it already).
      if (check.exists !== null && !(await findRecipientCheck(db, senderKey, body.recipient))) {
        await saveRecipientCheck(db, senderKey, body.recipient, { exists: check.exists, address: null });
      }
      return answer(check);
    },
  );
}
