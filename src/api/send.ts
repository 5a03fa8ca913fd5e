import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { checkAudioUrl } from '../audio/index.js';
import { isOwnSampleUrl, sampleUrlAdvice } from '../audio/samples.js';
import { newMessageId } from '../core/ids.js';
import { SealedMemo } from '../core/sealed-memo.js';
import type { PlatformDefinition } from '../platforms/platform.js';
import { checkCaption, checkDuration, isViolation, type Violation } from '../platforms/rules.js';
import type { MessageRow } from '../store/messages.js';
import { listenToTelegramBot } from '../store/listeners.js';
import { listenToLinkedin } from '../store/linkedin-listeners.js';
import { addListeningAccount } from '../store/listening-accounts.js';
import { setSenderProxy } from '../store/sender-proxy.js';
import type { Services } from '../services.js';
import { setUsageHeaders } from './auth.js';
import { usageScope } from './caller.js';
import { ApiError, invalidParameter, invalidRequest } from './errors.js';
import { proxyToKeep } from './proxy-setting.js';
import { findReplay, idempotencyScope, idempotentAnswer, replayStored, sendOutcome } from './idempotency.js';
import { DryRunResult, SendBody, SentMessage, withErrors } from './schemas.js';
import { checkSendAt, parseSendAtValue } from './send-at.js';
import { checkRecipientTimeZone, sendWindowWait } from './send-window.js';
import { rejectUnknownFields } from './unknown-fields.js';
import { sentMessageView } from './views.js';
import { quotaExceeded } from './quota.js';
import { dryRun } from './dry-run.js';
import { checkKeySender } from './key-senders.js';
import { refuseSuppressed } from './suppression-check.js';

const fail = (violation: Violation): ApiError => invalidParameter(violation.field, violation.message);

/** The top-level fields POST /send takes; any other is refused (400 invalid_request naming it). */
export const SEND_FIELDS = ['platform', 'recipient', 'audio_url', 'session', 'duration', 'caption', 'send_at', 'recording_indicator', 'cancel_on_reply', 'listen', 'recipient_time_zone', 'dry_run'] as const;

export function registerSendRoute(app: FastifyInstance, services: Services): void {
  const credentials = new SealedMemo(services.secretBox);
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/send',
    {
      config: { bucket: 'send', scope: 'send' },
      schema: {
        summary: 'Send a voice note',
        description:
          'Accepts the voice note and queues it (202); the outcome is read with GET /status/{message_id}. A recipient on the account\'s suppression list is refused (422 recipient_suppressed). With dry_run: true, answers 200 with what would be sent and each check, and stores, sends and counts nothing.',
        tags: ['messages'],
        headers: { type: 'object', properties: { 'idempotency-key': { type: 'string' } } },
        body: SendBody,
        response: { 200: DryRunResult, 202: SentMessage, ...withErrors(400, 402, 403, 409, 413, 415, 422) },
      },
      // Before the schema, the questions a caller should hear first: a field this route does not know
      // (`audioUrl` is named as such, not answered with "audio_url is required"), then a platform we do
      // not know (not "session is required" for a platform that may take none). A send_at that is no
      // timestamp at all (a number, "tomorrow") is a bad value (422 naming send_at) rather than the
      // schema's wrong-type or wrong-format 400.
      preValidation: async (request) => {
        const body = request.body as Record<string, unknown> | null | undefined;
        rejectUnknownFields(body, SEND_FIELDS);
        if (typeof body?.platform === 'string') knownPlatform(services, body.platform);
        const sendAt = body?.send_at;
        if (sendAt !== undefined && sendAt !== null) parseSendAtValue(sendAt);
        // Likewise a zone that is no string at all is a bad value (422 naming it), not the schema's 400.
        checkRecipientTimeZone(body?.recipient_time_zone);
      },
    },
    async (request, reply) => {
      const caller = request.caller!;
      const body = request.body;
      const dry = body.dry_run === true;
      // A dry run stores nothing, so it neither answers from nor keeps an Idempotency-Key.
      const replayed = dry ? undefined : await findReplay(services, request, reply, caller);
      if (replayed) return sendOutcome(reply, replayed);

      const platform = knownPlatform(services, body.platform);
      const recipientProblem = platform.checkRecipient(body.recipient);
      if (recipientProblem) throw fail(recipientProblem);
      const session = platform.checkSession(body.session as Record<string, unknown>);
      if (isViolation(session)) throw fail(session);
      if (platform.sessionFields) rejectUnknownFields(body.session, [...platform.sessionFields, 'proxy'], 'session.');
      await checkKeySender(services, caller, platform, session);
      const allowPrivate = services.config.audioAllowPrivateUrls;
      let urlProblem = checkAudioUrl(body.audio_url, { allowPrivate });
      // A sandbox send may name the service's own sample on the address it reached, private or not.
      // Looked at only once the URL is refused (allowing private addresses only ever lifts a refusal):
      // it parses the URL again and asks the socket its local address.
      const arrivedAt = { localAddress: request.socket.localAddress, localPort: request.socket.localPort };
      if (urlProblem && !allowPrivate && caller.env === 'test' && isOwnSampleUrl(body.audio_url, arrivedAt)) {
        urlProblem = checkAudioUrl(body.audio_url, { allowPrivate: true });
      }
      // A sample refused here is on the wrong port or address (or sent with a live key): say which URL works.
      if (urlProblem && !allowPrivate) urlProblem = sampleUrlAdvice(body.audio_url, arrivedAt, caller.env === 'test') ?? urlProblem;
      if (urlProblem) throw invalidParameter('audio_url', urlProblem);
      if (body.duration != null) {
        const durationProblem = checkDuration(platform, body.duration);
        if (durationProblem) throw fail(durationProblem);
      }
      if (body.caption != null) {
        const captionProblem = checkCaption(platform, body.caption);
        if (captionProblem) throw fail(captionProblem);
      }
      if (body.recording_indicator === true && platform.recordingIndicator !== true) {
        throw invalidParameter('recording_indicator', `${platform.name} shows no "recording…" indicator; send without recording_indicator`);
      }
      // A reply can only stop a note that waits: one sent at once is gone before anyone could answer.
      if (body.cancel_on_reply === true && (body.send_at === undefined || body.send_at === null)) {
        throw invalidParameter('cancel_on_reply', 'cancel_on_reply needs send_at: only a scheduled note can be canceled by a reply before it is sent');
      }
      if (body.listen === true && platform.name !== 'telegram' && platform.name !== 'linkedin') {
        throw invalidParameter('listen', `${platform.name} takes no listen: Telegram bots and LinkedIn sessions are listened to on request; WhatsApp sessions are always heard`);
      }
      if (platform.checkAtAccept) {
        const problem = await platform.checkAtAccept(session, { accountId: caller.accountId, env: caller.env }, services);
        if (problem) throw new ApiError(problem.code, problem.message, problem.details);
      }

      const senderKey = platform.senderKey?.(session) ?? null;

      const now = Date.now();
      // Checked at acceptance: a replay of an accepted scheduled send is answered above whatever the time now.
      const sendAt = checkSendAt(body.send_at, now);
      const recipientTimeZone = checkRecipientTimeZone(body.recipient_time_zone);
      // Outside the account's send window on this platform the note is accepted, due at the opening.
      const windowWait = await sendWindowWait(services, { accountId: caller.accountId, platform: platform.name, recipientTimeZone, notBefore: sendAt ?? now, now });
      if (dry) {
        const answer = await dryRun({ services, caller, platform, session, body, now }, sendAt);
        request.log.info({ dry_run: true, would_send: answer.would_send, checks: answer.checks.map((c) => `${c.id}:${c.result}`) }, 'dry run of a send');
        return reply.code(200).send(answer);
      }
      // Someone on the account's suppression list is never written to (docs/sending.md, "Opt-outs and suppressions").
      await refuseSuppressed(services, { accountId: caller.accountId, env: caller.env }, platform.name, body.recipient);
      // Kept only for a real send: a dry run stores nothing.
      const proxy = (body.session as { proxy?: unknown }).proxy;
      if (proxy !== undefined && proxy !== null) await keepSendProxy(services, platform, caller, senderKey, proxy);
      const scope = usageScope(caller, now);
      const row: MessageRow = {
        id: newMessageId(now),
        account_id: caller.accountId,
        env: caller.env,
        platform: platform.name,
        recipient: body.recipient,
        audio_url: body.audio_url,
        duration: body.duration ?? null,
        caption: body.caption ?? null,
        recording_indicator: body.recording_indicator === true ? 1 : 0,
        credentials: credentials.sealJson(session, now),
        affinity: platform.affinityKey?.(session) ?? null,
        sender_key: senderKey,
        request_id: request.id,
        status: 'queued',
        error_code: null,
        error_message: null,
        attempts: 0,
        next_attempt_at: now,
        lease_owner: null,
        lease_expires_at: null,
        period_start: scope.periodStart,
        created_at: now,
        updated_at: now,
        delivered_at: null,
        send_at: sendAt,
        cancel_on_reply: body.cancel_on_reply === true ? 1 : 0,
        recipient_time_zone: recipientTimeZone,
        ...(windowWait !== undefined ? { wait_reason: 'send_window', waited_until: windowWait } : {}),
      };
      const answer = sentMessageView(row);
      const idempotency = idempotencyScope(request, caller);
      const accepted = await services.db.hotPath.acceptSend({
        message: row,
        monthlyQuota: caller.limits.monthlyQuota,
        ...(idempotency ? { idempotency: idempotentAnswer(idempotency, { statusCode: 202, body: answer }, now) } : {}),
      });
      // A concurrent request with the same key was accepted first: answer as it was (nothing spent here).
      if (accepted.kind === 'replay') return sendOutcome(reply, replayStored(reply, accepted.stored, idempotency!.requestHash));
      if (accepted.kind === 'quota_exceeded') {
        throw quotaExceeded(caller.limits.monthlyQuota, scope.periodEnd);
      }
      services.callers.noteSent(scope, accepted.sent, now);
      setUsageHeaders(reply, { limit: caller.limits.monthlyQuota, remaining: Math.max(0, caller.limits.monthlyQuota - accepted.sent) });
      services.wakeWorker();
      // The sandbox never reaches the platform: its answering recipients stand in for listening.
      if (body.listen === true && caller.env === 'live') await keepListening(services, { accountId: caller.accountId, env: caller.env }, platform.name, row.sender_key ?? null, session, request.log);
      return reply.code(202).send(answer);
    },
  );
}

/**
 * `session.proxy` of a send (docs/proxies.md): checked, then kept on the sender's record for this and its
 * later sends, before the note is accepted (a proxy that fails its check refuses the send). Only senders
 * whose credentials come with each send take it: a WhatsApp session's or a Telegram account's proxy is
 * set when it is made or with PATCH /senders/{id}.
 */
async function keepSendProxy(services: Services, platform: PlatformDefinition, caller: { accountId: string; env: string }, senderKey: string | null, proxy: unknown): Promise<void> {
  const kind = senderKey === null ? undefined : (platform.senderKind?.(senderKey) ?? platform.name);
  if (senderKey === null || kind === undefined || (kind !== 'telegram_bot' && platform.name !== 'linkedin')) {
    throw invalidParameter('session.proxy', `${kind === 'telegram_account' ? 'a Telegram account' : `a ${platform.name} session`} takes its proxy when it is created or with PATCH /senders/{id}, not with each send`);
  }
  const kept = await proxyToKeep(services, proxy, { platform: platform.name, kind, env: caller.env, field: 'session.proxy' });
  await setSenderProxy(services.db.kysely, { accountId: caller.accountId, env: caller.env, platform: platform.name, senderKey }, kind, kept);
}

/** The platform named, or a 400: a platform we do not know is a mistyped field, not a bad value for a known field. */
export function knownPlatform(services: Services, name: string) {
  const platform = services.platforms.get(name);
  if (!platform) throw invalidRequest('platform', `platform must be one of ${services.platforms.names.join(', ')}`);
  return platform;
}

/**
 * `listen: true` on a Telegram send: the bot's token is kept sealed and its updates long-polled for 30
 * days (platforms/telegram/listener.ts). On a LinkedIn send: the whole session (li_at, csrf_token, the
 * browser's cookies and user agent) is kept sealed for 14 days after the last note and its conversations
 * read at growing intervals (platforms/linkedin/listener.ts). The note is accepted whatever happens here:
 * a failure is logged.
 */
async function keepListening(
  services: Services,
  owner: { accountId: string; env: string },
  platform: string,
  senderKey: string | null,
  session: unknown,
  log: { warn(obj: object, msg: string): void },
): Promise<void> {
  if (senderKey === null) return;
  const s = session as { bot_token?: unknown; li_at?: unknown; csrf_token?: unknown; cookies?: unknown; user_agent?: unknown };
  try {
    if (platform === 'telegram' && typeof s.bot_token === 'string') {
      await listenToTelegramBot(services.db.kysely, senderKey, services.secretBox.seal(s.bot_token), Date.now());
    } else if (platform === 'linkedin' && typeof s.li_at === 'string' && typeof s.csrf_token === 'string') {
      const kept = { li_at: s.li_at, csrf_token: s.csrf_token, ...(typeof s.cookies === 'string' ? { cookies: s.cookies } : {}), ...(typeof s.user_agent === 'string' ? { user_agent: s.user_agent } : {}) };
      await listenToLinkedin(services.db.kysely, senderKey, services.secretBox.seal(JSON.stringify(kept)), Date.now(), owner);
    } else {
      return;
    }
    // The listening is this account's (in this environment): only it sees and ends it on its notes.
    await addListeningAccount(services.db.kysely, { platform, senderKey, ...owner }, Date.now());
  } catch (err) {
    log.warn({ err }, 'could not start listening to the sender');
  }
}
