import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { cachedAudioFile } from '../../audio/cache.js';
import { profileOfSent, type AudioFormat } from '../../audio/targets.js';
import { PLATFORM_NAMES as PLATFORMS } from '../../platforms/registry.js';
import { findAttempts, findAudio, findReceipts, listMessages, type MessageAudioRow, type MessageFilters } from '../../store/message-log.js';
import { findMessage, type MessageRow } from '../../store/messages.js';
import { cancelNote } from '../../api/cancel.js';
import { rhythmView } from '../../message-log/views.js';
import type { DashboardContext } from '../context.js';
import { ctxOf, redirectTo, type DashboardDeps } from '../deps.js';
import { html, timeCell, type Html } from '../html.js';
import { platformLabel } from '../labels.js';
import { page, sendPage, type Notice } from '../layout.js';
import { parseWaveform, waveformSvg } from '../waveform.js';
import { findReplies } from '../../store/replies.js';
import { answeredMark, listeningSection, repliesSection } from './message-replies.js';
import { listeningView } from '../../message-log/views.js';
import { stopListening } from '../../api/listening.js';

const PAGE_SIZE = 50;
const STATUSES = ['queued', 'processing', 'delivered', 'failed', 'canceled'];
const DAY_MS = 86_400_000;
const AUDIO_FORMATS: readonly string[] = ['ogg_opus', 'm4a_aac'];

const NOTICES: Record<string, Notice> = {
  canceled: { kind: 'ok', text: 'Canceled: this voice note will not be sent, and it no longer counts against the monthly quota.' },
  canceled_counted: {
    kind: 'ok',
    text: 'Canceled: this voice note will not be sent again. An earlier attempt reached the platform, which may have delivered it, so it still counts against the monthly quota.',
  },
  not_cancelable: { kind: 'error', text: 'Too late to cancel: a worker had already taken this voice note.' },
  listening_stopped: { kind: 'ok', text: 'No longer listening: the bot token kept for it is erased.' },
};

type Query = Record<string, string | undefined>;

interface ListView {
  env: 'test' | 'live';
  filters: MessageFilters;
  /** The filter values as typed, to put back in the form and in paging links. */
  form: { env: string; status: string; platform: string; recipient: string; from: string; to: string };
}

const isDate = (value: string): boolean => /^\d{4}-\d{2}-\d{2}$/.test(value) && !Number.isNaN(Date.parse(`${value}T00:00:00Z`));

function readFilters(ctx: DashboardContext, query: Query): ListView {
  const env = query.env === 'live' || query.env === 'test' ? query.env : ctx.env;
  const status = STATUSES.includes(query.status ?? '') ? query.status! : '';
  const platform = (PLATFORMS as readonly string[]).includes(query.platform ?? '') ? query.platform! : '';
  const recipient = (query.recipient ?? '').trim().slice(0, 200);
  const from = isDate(query.from ?? '') ? query.from! : '';
  const to = isDate(query.to ?? '') ? query.to! : '';
  const filters: MessageFilters = {
    ...(status ? { status } : {}),
    ...(platform ? { platform } : {}),
    ...(recipient ? { recipient } : {}),
    // Dates are whole UTC days, both ends included.
    ...(from ? { createdGte: Date.parse(`${from}T00:00:00Z`) } : {}),
    ...(to ? { createdLte: Date.parse(`${to}T00:00:00Z`) + DAY_MS - 1 } : {}),
  };
  return { env, filters, form: { env, status, platform, recipient, from, to } };
}

const select = (name: string, label: string, current: string, options: readonly string[], any: string, text: (o: string) => string = (o) => o): Html =>
  html`<label>${label}<select name="${name}"><option value="">${any}</option>${options.map(
    (o) => html`<option value="${o}"${o === current ? html` selected` : ''}>${text(o)}</option>`,
  )}</select></label>`;

function pagingLink(form: ListView['form'], cursor: { starting_after?: string; ending_before?: string }): string {
  const params = new URLSearchParams(Object.entries(form).filter(([, v]) => v !== '') as [string, string][]);
  for (const [k, v] of Object.entries(cursor)) params.set(k, v);
  return `/dashboard/messages?${params.toString()}`;
}

function statusCell(row: MessageRow): Html {
  const waiting = rhythmView(row).waiting_for;
  return html`<span class="status-${row.status}">${row.status}</span>${waiting ? html` <span class="hint" data-waiting="${waiting}">(${WAITING_TEXT[waiting]})</span>` : ''}`;
}

/** Why a note was canceled (messages.cancel_reason), in the page's words. */
const CANCEL_TEXT: Record<string, string> = {
  requested: 'canceled on request (the API or this dashboard)',
  replied: 'the recipient replied before it was sent (cancel_on_reply)',
  suppressed: 'the recipient is on the suppression list (or opted out)',
};

const WAITING_TEXT: Record<string, string> = {
  daily_cap: "waits: sender's daily cap",
  recording_indicator: 'showing “recording…”',
  send_window: 'waits: send window',
};

/** An indicator asked for and not shown: "yet" only while the note can still go (never a state that will not change). */
function notShownText(status: string): string {
  if (status === 'failed') return 'asked for, not shown: the note failed first';
  if (status === 'canceled') return 'asked for, not shown: the note was canceled first';
  if (status === 'delivered') return 'asked for, not shown: the note went without it';
  return 'asked for, not shown yet';
}

/** The "recording…" indicator and a wait for the sender's cap, on the message's page. */
function rhythmFacts(row: MessageRow): Html {
  const view = rhythmView(row);
  const indicator = view.recording_indicator;
  return html`<dt>Recording indicator</dt><dd data-field="recording_indicator">${
    indicator === null ? 'not asked for' : indicator.shown_at === null ? notShownText(row.status) : html`shown at ${timeCell(row.indicator_started_at ?? null)} for ${indicator.seconds} s`
  }</dd>
${view.waiting_for === 'daily_cap' ? html`<dt>Waiting</dt><dd data-field="waiting_for">for the next day: the sender's daily cap is reached; next try ${timeCell(row.next_attempt_at)}</dd>` : ''}
${view.waiting_for === 'recording_indicator' ? html`<dt>Waiting</dt><dd data-field="waiting_for">showing “recording…” until ${timeCell(row.next_attempt_at)}</dd>` : ''}
${view.waiting_for === 'sender_rest' ? html`<dt>Waiting</dt><dd data-field="waiting_for">for the sender's rest to end; next try ${timeCell(row.next_attempt_at)}</dd>` : ''}
${view.waiting_for === 'send_window' ? html`<dt>Waiting</dt><dd data-field="waiting_for">for the account's send window to open; next try ${timeCell(row.next_attempt_at)}</dd>` : ''}
${view.waiting_for === 'sender_restricted' ? html`<dt>Waiting</dt><dd data-field="waiting_for">for the sender's restriction on new chats to end; next try ${timeCell(row.next_attempt_at)}</dd>` : ''}`;
}

async function findOwnMessage(deps: DashboardDeps, ctx: DashboardContext, id: string): Promise<MessageRow | undefined> {
  const db = deps.services.db.kysely;
  // The account's own message in either environment: the dashboard user owns both.
  return (await findMessage(db, { accountId: ctx.account.id, env: ctx.env }, id)) ?? (await findMessage(db, { accountId: ctx.account.id, env: ctx.env === 'test' ? 'live' : 'test' }, id));
}

const RECEIPT_TEXT: Record<string, string> = {
  delivered_to_device: 'delivered to the device',
  read: 'read',
  played: 'played',
};

function noReceiptsText(row: MessageRow): string {
  if (row.platform === 'telegram') return 'Telegram does not tell bots when a voice note is heard: there are no receipts for this platform.';
  if (row.platform === 'linkedin') return 'LinkedIn does not report when a voice message is heard: there are no receipts for this platform.';
  return row.status === 'delivered' ? 'No receipt yet: the recipient’s phone has not reported the voice note as received, read or played.' : 'Receipts come after delivery.';
}

const formatSize = (bytes: number | null): string => (bytes === null ? '—' : bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`);
const formatSeconds = (s: number | null): string => (s === null ? '—' : `${Number(s).toFixed(2)} s`);

export function registerMessagePages(app: FastifyInstance, deps: DashboardDeps): void {
  const db = deps.services.db.kysely;

  app.get('/messages', async (request, reply) => {
    const ctx = ctxOf(request);
    const query = request.query as Query;
    const view = readFilters(ctx, query);
    const cursor = {
      ...(query.starting_after ? { startingAfter: query.starting_after } : {}),
      ...(query.ending_before && !query.starting_after ? { endingBefore: query.ending_before } : {}),
    };
    const { rows, hasMore } = await listMessages(db, { accountId: ctx.account.id, env: view.env }, view.filters, { limit: PAGE_SIZE, ...cursor });
    const backwards = cursor.endingBefore !== undefined;
    const newer = rows.length > 0 && (backwards ? hasMore : cursor.startingAfter !== undefined) ? pagingLink(view.form, { ending_before: rows[0]!.id }) : null;
    const older = rows.length > 0 && (backwards || hasMore) ? pagingLink(view.form, { starting_after: rows[rows.length - 1]!.id }) : null;
    const f = view.form;
    return sendPage(
      reply,
      page(
        ctx,
        { sections: deps.sections, section: 'messages', title: 'Messages', path: '/dashboard/messages' },
        html`<form method="get" action="/dashboard/messages" class="filters" role="search" aria-label="Filter messages">
${select('env', 'Environment', f.env, ['test', 'live'], 'current')}
${select('status', 'Status', f.status, STATUSES, 'any')}
${select('platform', 'Platform', f.platform, PLATFORMS, 'any', platformLabel)}
<label>Recipient<input name="recipient" value="${f.recipient}" autocomplete="off"></label>
<label>From (UTC)<input type="date" name="from" value="${f.from}"></label>
<label>To (UTC)<input type="date" name="to" value="${f.to}"></label>
<button type="submit">Filter</button>
<a href="/dashboard/messages">Clear</a>
</form>
<p class="hint">Newest first, ${view.env} environment.</p>
${
  rows.length === 0
    ? html`<p>No messages match.</p>`
    : html`<div class="table-wrap" tabindex="0" role="region" aria-label="Messages"><table>
<thead><tr><th scope="col">Message</th><th scope="col">Created</th><th scope="col">Scheduled for</th><th scope="col">Platform</th><th scope="col">Recipient</th><th scope="col">Status</th><th scope="col">Error</th></tr></thead>
<tbody>${rows.map(
        (row) => html`<tr data-message-id="${row.id}">
<td><a href="/dashboard/messages/${row.id}"><code>${row.id}</code></a></td>
<td>${timeCell(row.created_at)}</td>
<td data-field="send_at">${row.send_at == null ? 'at once' : timeCell(row.send_at)}</td>
<td data-field="platform">${platformLabel(row.platform)}</td>
<td>${row.recipient}</td>
<td>${statusCell(row)}${answeredMark(row)}</td>
<td>${row.status === 'failed' ? html`<code>${row.error_code ?? 'platform_error'}</code>` : ''}</td>
</tr>`,
      )}</tbody></table></div>`
}
<nav class="pager" aria-label="Pages">${newer ? html`<a href="${newer}" rel="prev">← Newer</a>` : ''}${older ? html`<a href="${older}" rel="next">Older →</a>` : ''}</nav>`,
      ),
    );
  });

  app.get<{ Params: { id: string } }>('/messages/:id', async (request, reply) => {
    const ctx = ctxOf(request);
    const row = await findOwnMessage(deps, ctx, request.params.id);
    if (!row) {
      return sendPage(
        reply,
        page(ctx, { sections: deps.sections, section: 'messages', title: 'Message not found', path: '/dashboard/messages' }, html`<p>No message ${request.params.id} in this account. <a href="/dashboard/messages">Back to the messages</a></p>`),
        404,
      );
    }
    const [attempts, audio, receipts, replies, listening] = await Promise.all([
      findAttempts(db, row.id),
      findAudio(db, row.id),
      findReceipts(db, row.id),
      findReplies(db, row.id),
      listeningView(db, row),
    ]);
    const waveform = audio ? parseWaveform(audio.waveform) : null;
    const playable = audio ? (await convertedFile(deps, row.platform, audio)) !== undefined : false;
    const failed = row.status === 'failed';
    const notice = NOTICES[(request.query as Query).notice ?? ''];
    return sendPage(
      reply,
      page(
        ctx,
        { sections: deps.sections, section: 'messages', title: `Message ${row.id}`, path: '/dashboard/messages', notice },
        html`<p><a href="/dashboard/messages?env=${row.env}">← All messages</a></p>
${
  failed
    ? html`<div class="notice notice-error" role="alert" data-error-code="${row.error_code ?? 'platform_error'}"><strong>Failed: <code>${row.error_code ?? 'platform_error'}</code></strong> — ${row.error_message ?? 'delivery failed'}</div>`
    : ''
}
<dl class="facts">
<dt>Status</dt><dd data-field="status">${statusCell(row)}</dd>
<dt>Environment</dt><dd>${row.env}</dd>
<dt>Platform</dt><dd>${platformLabel(row.platform)}</dd>
<dt>Recipient</dt><dd>${row.recipient}</dd>
<dt>Audio URL</dt><dd><code>${row.audio_url}</code></dd>
${row.caption !== null || row.platform === 'telegram' ? html`<dt>Caption</dt><dd data-field="caption">${row.caption ?? '—'}</dd>` : ''}
<dt>Created</dt><dd>${timeCell(row.created_at)}</dd>
<dt>Scheduled for</dt><dd data-field="send_at">${row.send_at == null ? 'at once' : timeCell(row.send_at)}</dd>
<dt>Delivered</dt><dd>${row.status === 'delivered' ? timeCell(row.delivered_at, '—', true) : '—'}</dd>
${row.status === 'canceled' ? html`<dt>Canceled</dt><dd data-field="canceled_at">${timeCell(row.canceled_at ?? null, '—')}</dd><dt>Why</dt><dd data-field="cancel_reason">${CANCEL_TEXT[row.cancel_reason ?? ''] ?? 'not recorded'}</dd>` : ''}
${Number(row.cancel_on_reply ?? 0) === 1 ? html`<dt>Cancel on reply</dt><dd data-field="cancel_on_reply">asked: a reply from the recipient before the scheduled time cancels it</dd>` : ''}
<dt>Attempts</dt><dd>${Number(row.attempts)}</dd>
${rhythmFacts(row)}
</dl>
${
  // Only a note no worker has taken yet can be canceled; the store checks again (a worker may take it meanwhile).
  row.status === 'queued'
    ? html`<form method="post" action="/dashboard/messages/${row.id}/cancel" class="cancel-message">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<button type="submit">Cancel this voice note</button>
</form>`
    : ''
}

<h2>Attempts</h2>
${
  attempts.length === 0
    ? html`<p>${row.status === 'canceled' ? 'No attempt: the note was canceled before it was sent, and never will be.' : 'No attempt yet.'}</p>`
    : html`<div class="table-wrap" tabindex="0" role="region" aria-label="Attempts"><table>
<thead><tr><th scope="col">#</th><th scope="col">Started</th><th scope="col">Took</th><th scope="col">Outcome</th><th scope="col">Error</th><th scope="col">Next attempt</th></tr></thead>
<tbody>${attempts.map(
        (a) => html`<tr>
<td>${Number(a.attempt)}</td>
<td>${timeCell(a.started_at, '—', true)}</td>
<td>${Math.max(0, Number(a.ended_at) - Number(a.started_at))} ms</td>
<td>${a.outcome}</td>
<td>${a.error_code ? html`<code>${a.error_code}</code> ${a.error_message ?? ''}` : '—'}</td>
<td>${timeCell(a.next_attempt_at, '—')}</td>
</tr>`,
      )}</tbody></table></div>`
}

<h2>Audio</h2>
${
  audio
    ? html`<div class="cards">
<section class="card" aria-labelledby="audio-source"><h3 id="audio-source">As detected</h3><dl class="facts">
<dt>Format</dt><dd>${audio.source_format ?? '—'}${audio.source_codec ? ` (${audio.source_codec})` : ''}</dd>
<dt>Duration</dt><dd>${formatSeconds(audio.source_duration)}</dd>
<dt>Size</dt><dd>${formatSize(audio.source_size === null ? null : Number(audio.source_size))}</dd>
</dl></section>
<section class="card" aria-labelledby="audio-converted"><h3 id="audio-converted">As sent (converted)</h3><dl class="facts">
<dt>Format</dt><dd>${audio.converted_format} (${audio.converted_mime})</dd>
<dt>Duration</dt><dd>${formatSeconds(Number(audio.converted_duration))}</dd>
<dt>Size</dt><dd>${formatSize(Number(audio.converted_size))}</dd>
</dl>
${waveform ? html`<p class="waveform-label" id="waveform-label">Waveform of the converted file</p>${waveformSvg(waveform, `Waveform of the converted file, ${waveform.length} bars`)}` : ''}
${
  playable
    ? html`<p><audio controls preload="metadata" src="/dashboard/messages/${row.id}/audio" aria-label="The converted file, as the recipient hears it">Your browser cannot play this audio.</audio></p>`
    : html`<p>The converted file is no longer in the audio cache, so it cannot be played here.</p>`
}</section>
</div>`
    : html`<p data-audio="none">${
        Number(row.attempts) === 0
          ? row.status === 'canceled'
            ? 'No audio: the note was canceled before its first attempt, so its audio was never fetched.'
            : 'No audio yet: it is fetched and converted at the first attempt.'
          : failed
            ? 'No audio: the attempt failed before the audio was converted (the error above says why).'
            : 'No audio recorded for this attempt yet.'
      }</p>`
}

<h2>Receipts</h2>
${
  receipts.length === 0
    ? html`<p data-receipts="none">${noReceiptsText(row)}</p>`
    : html`<ul data-receipts="some">${receipts.map((r) => html`<li>${RECEIPT_TEXT[r.kind] ?? r.kind}: ${timeCell(r.at)}${r.source === 'sandbox' ? ' (sandbox)' : ''}</li>`)}</ul>`
}
${repliesSection(row, replies)}
${listeningSection(row, listening, ctx.csrf)}`,
      ),
    );
  });

  // Stop listening: the same as DELETE /api/v1/messages/{id}/listening (the CSRF token is checked before this runs).
  app.post<{ Params: { id: string } }>('/messages/:id/listening/delete', async (request, reply) => {
    const ctx = ctxOf(request);
    const row = await findOwnMessage(deps, ctx, request.params.id);
    if (!row) return redirectTo(reply, '/dashboard/messages');
    await stopListening(deps.services, { accountId: row.account_id, env: row.env }, row.id);
    return redirectTo(reply, `/dashboard/messages/${row.id}?notice=listening_stopped`);
  });

  // The Cancel button: the same rules as POST /api/v1/messages/{id}/cancel (the CSRF token is checked before this runs).
  app.post<{ Params: { id: string } }>('/messages/:id/cancel', async (request, reply) => {
    const ctx = ctxOf(request);
    const row = await findOwnMessage(deps, ctx, request.params.id);
    if (!row) return redirectTo(reply, '/dashboard/messages');
    const outcome = await cancelNote(deps.services, { accountId: row.account_id, env: row.env }, row.id);
    return redirectTo(reply, `/dashboard/messages/${row.id}?notice=${outcome.kind !== 'canceled' ? 'not_cancelable' : Number(outcome.message.platform_reached ?? 0) !== 0 ? 'canceled_counted' : 'canceled'}`);
  });

  // The converted file, for the page's <audio>: only a signed-in user of the message's account gets it.
  app.get<{ Params: { id: string } }>('/messages/:id/audio', async (request, reply) => {
    const ctx = ctxOf(request);
    const row = await findOwnMessage(deps, ctx, request.params.id);
    const audio = row ? await findAudio(db, row.id) : undefined;
    if (!audio) return notFoundText(reply, 'no audio for this message');
    const found = await convertedFile(deps, row!.platform, audio);
    if (!found) return notFoundText(reply, 'the converted audio is no longer in the cache');
    return sendFile(request, reply, found.path, found.size, audio.converted_mime);
  });
}

/** The converted file of a message in the audio cache, while the cache keeps it. */
async function convertedFile(deps: DashboardDeps, platform: string, audio: MessageAudioRow): Promise<{ path: string; size: number } | undefined> {
  const sha = audio.source_sha256 ?? '';
  if (!/^[0-9a-f]{64}$/.test(sha) || !AUDIO_FORMATS.includes(audio.converted_format)) return undefined;
  const path = cachedAudioFile(deps.services.config.dataDir, sha, profileOfSent(platform, audio.converted_format as AudioFormat));
  const info = await stat(path).catch(() => null);
  return info?.isFile() ? { path, size: info.size } : undefined;
}

function notFoundText(reply: FastifyReply, text: string): FastifyReply {
  return reply.code(404).header('Content-Type', 'text/plain; charset=utf-8').header('Cache-Control', 'no-store').send(text);
}

/** Whole file, or the one byte range asked for (players seek with Range requests). */
function sendFile(request: FastifyRequest, reply: FastifyReply, file: string, size: number, mime: string): FastifyReply {
  reply.header('Content-Type', mime).header('Accept-Ranges', 'bytes').header('Cache-Control', 'private, max-age=300');
  const range = /^bytes=(\d*)-(\d*)$/.exec(request.headers.range ?? '');
  if (range && (range[1] !== '' || range[2] !== '')) {
    let start = range[1] === '' ? size - Number(range[2]) : Number(range[1]);
    let end = range[1] === '' || range[2] === '' ? size - 1 : Math.min(Number(range[2]), size - 1);
    start = Math.max(0, start);
    if (start > end || start >= size) return reply.code(416).header('Content-Range', `bytes */${size}`).send();
    end = Math.min(end, size - 1);
    reply.code(206).header('Content-Range', `bytes ${start}-${end}/${size}`).header('Content-Length', String(end - start + 1));
    return reply.send(createReadStream(file, { start, end }));
  }
  reply.header('Content-Length', String(size));
  return reply.send(createReadStream(file));
}
