import { createHash } from 'node:crypto';
import { ApiClient, describeApiError, retryAfterSeconds, Unreachable, type ApiErrorBody, type DryRunAnswer, type MessageStatus, type SendBody, type SentMessage } from './http.js';
import { CsvError, parseCsv } from './csv.js';
import { startProgressBar, startSpinner } from './progress.js';

/** A failure the user can act on: one line on stderr, exit code 1. */
export class SendFailure extends Error {}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// `proxy`: a Telegram bot's or LinkedIn cookie's own proxy, sent as session.proxy (docs/proxies.md).
const SESSION_FIELDS = ['bot_token', 'li_at', 'csrf_token', 'user_agent', 'cookies', 'session_id', 'proxy'] as const;
const REQUIRED_COLUMNS = ['platform', 'recipient', 'audio_url'] as const;
// `dry_run`: the row is only checked (docs/sending.md, "Dry runs"), nothing stored or sent.
const FLAG_COLUMNS = ['cancel_on_reply', 'recording_indicator', 'listen', 'dry_run'] as const;
const OPTIONAL_COLUMNS = ['caption', 'duration', 'send_at', 'recipient_time_zone', ...FLAG_COLUMNS, ...SESSION_FIELDS] as const;
const FINAL = new Set(['delivered', 'failed', 'canceled']);
/** Answers worth trying again with the same Idempotency-Key: nothing can be sent twice. */
const TRANSIENT_STATUSES = new Set([500, 502, 503, 504]);
const MAX_TRANSIENT_TRIES = 5;

/** `duration` as given: a number when it reads as one, else the text (the API then says what is wrong). */
function durationValue(raw: string): number | string {
  return /^\d+(\.\d+)?$/.test(raw.trim()) ? Number(raw.trim()) : raw;
}

export interface SendFields {
  platform: string;
  recipient: string;
  audio_url: string;
  caption?: string;
  duration?: string;
  /** ISO 8601 with Z or an offset: a scheduled send. */
  send_at?: string;
  /** The recipient's IANA time zone: the account's send window applies in it too (docs/sending.md, "Send windows"). */
  recipient_time_zone?: string;
  /** true / 1 / yes: a reply from the recipient before the scheduled send cancels it; empty, false / 0 / no: not. */
  cancel_on_reply?: string;
  /** true / 1 / yes: "recording…" shows before the note (Telegram, WhatsApp). */
  recording_indicator?: string;
  /** true / 1 / yes: the sender is listened to for replies (a Telegram bot, a LinkedIn session). */
  listen?: string;
  /** true / 1 / yes: a dry run, every check and nothing sent; empty, false / 0 / no: a real send. */
  dry_run?: string;
  bot_token?: string;
  li_at?: string;
  csrf_token?: string;
  user_agent?: string;
  cookies?: string;
  session_id?: string;
  /** The sender's own proxy URL (a Telegram bot, a LinkedIn cookie). */
  proxy?: string;
}

/** A yes/no field (`cancel_on_reply`, `listen`, …) as given: a boolean when it reads as one, else the text (the API then says what is wrong); undefined when off. */
function flagValue(raw: string | undefined): boolean | string | undefined {
  const value = raw?.trim().toLowerCase() ?? '';
  if (value === '' || value === 'false' || value === '0' || value === 'no') return undefined;
  return value === 'true' || value === '1' || value === 'yes' ? true : raw;
}

/** The `session` object of a send (or a recipient check) from the credential fields given. */
export function sessionOf(fields: Partial<Record<(typeof SESSION_FIELDS)[number], string>>): Record<string, string> {
  const session: Record<string, string> = {};
  for (const name of SESSION_FIELDS) {
    const value = fields[name];
    if (value !== undefined && value !== '') session[name] = value;
  }
  return session;
}

/** The request body of one send: empty optional fields are "not given". */
export function sendBody(fields: SendFields): SendBody {
  const session = sessionOf(fields);
  const body: SendBody = {
    platform: fields.platform,
    recipient: fields.recipient,
    audio_url: fields.audio_url,
    session,
    ...(fields.caption !== undefined && fields.caption !== '' ? { caption: fields.caption } : {}),
    ...(fields.duration !== undefined && fields.duration !== '' ? { duration: durationValue(fields.duration) } : {}),
    ...(fields.send_at !== undefined && fields.send_at !== '' ? { send_at: fields.send_at } : {}),
    ...(fields.recipient_time_zone !== undefined && fields.recipient_time_zone.trim() !== '' ? { recipient_time_zone: fields.recipient_time_zone.trim() } : {}),
  };
  for (const name of FLAG_COLUMNS) {
    const value = flagValue(fields[name]);
    if (value !== undefined) body[name] = value;
  }
  return body;
}

export type Waiting = (seconds: number, why: string) => void;

/**
 * POST /send until it has an answer to keep: 429s are waited out (Retry-After), 5xx retried a few
 * times; the Idempotency-Key makes every retry safe.
 */
export async function sendUntilAnswered(
  client: ApiClient,
  body: SendBody,
  idempotencyKey: string | undefined,
  onWait: Waiting,
  /** Try again when the service cannot be reached (a restart in the middle of a run), rather than stop at once. */
  retryUnreachable = false,
): Promise<{ ok: true; message: SentMessage; replayed: boolean } | { ok: true; dryRun: DryRunAnswer } | { ok: false; status: number; error: ApiErrorBody }> {
  let transient = 0;
  for (;;) {
    let answer;
    try {
      answer = await client.send(body, idempotencyKey);
    } catch (error) {
      if (!(error instanceof Unreachable) || !retryUnreachable || ++transient >= MAX_TRANSIENT_TRIES) throw error;
      const seconds = 2 ** (transient - 1);
      onWait(seconds, error.message);
      await sleep(seconds * 1000);
      continue;
    }
    if (answer.ok) {
      if (isDryRunAnswer(answer.body)) return { ok: true, dryRun: answer.body };
      return { ok: true, message: answer.body, replayed: answer.headers.get('idempotent-replayed') === 'true' };
    }
    if (answer.status === 429) {
      const seconds = retryAfterSeconds(answer.headers, 5);
      onWait(seconds, 'rate limited');
      await sleep(seconds * 1000);
      continue;
    }
    if (TRANSIENT_STATUSES.has(answer.status) && ++transient < MAX_TRANSIENT_TRIES) {
      const seconds = retryAfterSeconds(answer.headers, 2 ** transient);
      onWait(seconds, `${answer.status} ${answer.error.code}`);
      await sleep(seconds * 1000);
      continue;
    }
    return { ok: false, status: answer.status, error: answer.error };
  }
}

function isDryRunAnswer(body: SentMessage | DryRunAnswer): body is DryRunAnswer {
  return (body as Partial<DryRunAnswer>).dry_run === true;
}

/** A dry run's checks in one line: what failed (with the real send's error code) or would make the note wait. */
export function dryRunVerdict(answer: DryRunAnswer): string {
  const failed = answer.checks.filter((check) => check.result === 'fail').map((check) => `${check.id}: ${check.error?.code ?? 'failed'}: ${check.error?.message ?? check.detail ?? ''}`);
  const waits = answer.checks.filter((check) => check.result === 'wait').map((check) => `${check.id}${check.detail ? `: ${check.detail}` : ''}`);
  const waiting = waits.length > 0 ? `; would wait (${waits.join('; ')})` : '';
  return answer.would_send ? `dry run: would send${waiting}` : `dry run: would not send: ${failed.join('; ')}${waiting}`;
}

/** Attempts as GET /messages/{id} lists them. */
interface AttemptsView {
  attempts?: Array<{ attempt: number; error: { code: string; message: string } | null; next_attempt_at: string | null }>;
}

/**
 * Why a queued note that was tried already waits: its last attempt's error and when it is tried again
 * (GET /status keeps a retried attempt's error to itself until the note has failed for good). Undefined
 * before the first attempt, or when the log cannot be read now.
 */
async function lastAttemptError(client: ApiClient, id: string): Promise<string | undefined> {
  const answer = await client.request<AttemptsView>('GET', `/messages/${encodeURIComponent(id)}`).catch(() => undefined);
  const last = answer?.ok ? answer.body.attempts?.at(-1) : undefined;
  if (!last?.error) return undefined;
  return `attempt ${last.attempt} failed: ${last.error.code}: ${last.error.message}${last.next_attempt_at ? `; next attempt at ${last.next_attempt_at}` : ''}`;
}

/** GET /status every half second until the message is delivered or failed; `why`: the last attempt's error while a retry waits. */
export async function followMessage(client: ApiClient, id: string, onStatus: (status: string, why?: string) => void): Promise<MessageStatus> {
  let transient = 0;
  for (;;) {
    let answer;
    try {
      answer = await client.status(id);
    } catch (error) {
      if (!(error instanceof Unreachable) || ++transient >= MAX_TRANSIENT_TRIES) throw error;
      await sleep(1000 * 2 ** transient);
      continue;
    }
    if (answer.ok) {
      transient = 0;
      if (FINAL.has(answer.body.status)) return answer.body;
      onStatus(answer.body.status, answer.body.status === 'queued' ? await lastAttemptError(client, id) : undefined);
    } else if (answer.status === 429 || TRANSIENT_STATUSES.has(answer.status)) {
      await sleep(retryAfterSeconds(answer.headers, 2) * 1000);
      continue;
    } else {
      throw new SendFailure(describeApiError(answer.status, answer.error));
    }
    await sleep(500);
  }
}

const stderrLine = (line: string): void => {
  process.stderr.write(`voicenote: ${line}\n`);
};

export interface OneSendOptions {
  fields: SendFields;
  idempotencyKey?: string;
  wait: boolean;
  json: boolean;
}

/** `voicenote send --platform … --recipient … --audio …`: one voice note, optionally followed to its outcome. */
export async function sendOne(client: ApiClient, options: OneSendOptions, out: (line: string) => void): Promise<void> {
  const tty = process.stderr.isTTY === true;
  const answer = await sendUntilAnswered(client, sendBody(options.fields), options.idempotencyKey, (seconds, why) => {
    if (!tty) stderrLine(`${why}; retrying in ${seconds} s`);
  });
  if (!answer.ok) throw new SendFailure(describeApiError(answer.status, answer.error));
  if ('dryRun' in answer) {
    // The API's 200 body, as for a real send's 202: one line with --json, indented for a reader.
    out(options.json ? JSON.stringify(answer.dryRun) : JSON.stringify(answer.dryRun, null, 2));
    if (!answer.dryRun.would_send) throw new SendFailure(dryRunVerdict(answer.dryRun));
    return;
  }
  const sent = answer.message;
  if (!options.wait) {
    if (options.json) out(JSON.stringify(sent));
    else out(`${sent.status} ${sent.id}  ${sent.platform} → ${sent.recipient}${options.fields.send_at ? `  scheduled for ${options.fields.send_at}` : ''}`);
    return;
  }
  const spinner = startSpinner(`${sent.id} ${sent.status}`);
  let final: MessageStatus;
  let said: string | undefined;
  try {
    final = await followMessage(client, sent.id, (status, why) => {
      spinner.update(`${sent.id} ${status}${why ? ` (${why})` : ''}`);
      // Without a terminal the spinner is silent: each new reason is one stderr line.
      if (!tty && why !== undefined && why !== said) stderrLine(`${sent.id} ${status}: ${why}`);
      said = why;
    });
  } finally {
    spinner.stop();
  }
  // GET /status's body, as the README promises: indented for a reader, one line with --json.
  out(options.json ? JSON.stringify(final) : JSON.stringify(final, null, 2));
  if (final.status === 'failed') throw new SendFailure(`${final.id} failed: ${final.error?.code ?? 'platform_error'}`);
  if (final.status === 'canceled') throw new SendFailure(`${final.id} was canceled before it was sent`);
}

/** A row's result: the message accepted, the API's error, or (a dry run) the API's 200 body after the row's number. */
export type RowOutcome = { row: number; id: string } | { row: number; error: { code: string; message: string } } | ({ row: number } & DryRunAnswer);

export interface BulkResult {
  accepted: number;
  rejected: number;
  /** Of the accepted rows, those an earlier run had already sent (answered `Idempotent-Replayed`): not sent again. */
  replayed: number;
  rows: RowOutcome[];
}

/** The last line of a CSV run: "3 accepted (2 already sent by an earlier run, not sent again), 1 rejected, of 4 rows". */
export function csvSummary(result: BulkResult): string {
  const replays = result.replayed > 0 ? ` (${result.replayed} already sent by an earlier run, not sent again)` : '';
  const dry = result.rows.filter((row) => 'dry_run' in row).length;
  const dryRuns = dry > 0 ? `; ${dry} dry ${dry === 1 ? 'run' : 'runs'}, nothing stored or sent for ${dry === 1 ? 'it' : 'them'}` : '';
  return `${result.accepted} accepted${replays}, ${result.rejected} rejected, of ${result.rows.length} ${result.rows.length === 1 ? 'row' : 'rows'}${dryRuns}`;
}

interface CsvRow {
  row: number;
  fields: SendFields;
  idempotencyKey: string;
}

/**
 * Rows of the file, each with an Idempotency-Key derived from the header, the row's number and its
 * content: running the same file again replays the sends already made instead of making them twice
 * (for as long as the service keeps idempotency keys, 24 hours).
 */
export function readSendCsv(text: string): CsvRow[] {
  let records: string[][];
  try {
    records = parseCsv(text);
  } catch (error) {
    throw new SendFailure(`CSV: ${(error as CsvError).message}`);
  }
  const header = records.shift()?.map((name) => name.trim().toLowerCase());
  if (!header) throw new SendFailure('CSV: the file is empty (expected a header line)');
  const known = new Set<string>([...REQUIRED_COLUMNS, ...OPTIONAL_COLUMNS]);
  const unknown = header.filter((name) => !known.has(name));
  if (unknown.length > 0) throw new SendFailure(`CSV: unknown column ${unknown.map((n) => `"${n}"`).join(', ')} (columns: ${[...known].join(', ')})`);
  const missing = REQUIRED_COLUMNS.filter((name) => !header.includes(name));
  if (missing.length > 0) throw new SendFailure(`CSV: the header must name ${REQUIRED_COLUMNS.join(', ')}; missing ${missing.join(', ')}`);
  const duplicate = header.find((name, i) => header.indexOf(name) !== i);
  if (duplicate) throw new SendFailure(`CSV: column "${duplicate}" appears twice`);
  return records.map((record, index) => {
    const fields = Object.fromEntries(header.map((name, i) => [name, (record[i] ?? '').trim()])) as unknown as SendFields;
    const digest = createHash('sha256').update(JSON.stringify([header, index + 1, record])).digest('hex').slice(0, 40);
    return { row: index + 1, fields, idempotencyKey: `csv-${digest}` };
  });
}

/** `voicenote send --csv FILE`: one send per row, in order, through the API and its limits; `dryRun`: every row only checked. */
export async function sendCsv(client: ApiClient, text: string, options: { dryRun?: boolean } = {}): Promise<BulkResult> {
  const rows = readSendCsv(text).map((row) => (options.dryRun ? { ...row, fields: { ...row.fields, dry_run: 'true' } } : row));
  const result: BulkResult = { accepted: 0, rejected: 0, replayed: 0, rows: [] };
  const tty = process.stderr.isTTY === true;
  const bar = startProgressBar();
  const counts = () => ({ done: result.accepted, failed: result.rejected, total: rows.length });
  // Ctrl-C: no half-drawn bar left behind, and the way to go on (each row's Idempotency-Key makes a rerun safe).
  const interrupted = (): void => {
    bar.stop();
    stderrLine(`interrupted after ${result.rows.length} of ${rows.length} rows; run the same command again to send the rest (rows already sent are not sent twice)`);
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  bar.update(counts());
  try {
    for (const row of rows) {
      const body = sendBody(row.fields);
      const answer = await sendUntilAnswered(
        client,
        body,
        // A dry run's key would be neither answered from nor kept: none is sent.
        body.dry_run === true ? undefined : row.idempotencyKey,
        (seconds, why) => {
          if (tty) bar.update(counts(), `waiting ${seconds}s (${why})`);
          else stderrLine(`${why}; waiting ${seconds} s before row ${row.row}`);
        },
        // Once the service has answered, a connection that drops is a restart to wait for, not a wrong address.
        result.rows.length > 0,
      );
      if (answer.ok && 'dryRun' in answer) {
        // A dry row counts as the real send would: accepted when no check failed, else rejected.
        if (answer.dryRun.would_send) result.accepted++;
        else result.rejected++;
        result.rows.push({ row: row.row, ...answer.dryRun });
      } else if (answer.ok) {
        result.accepted++;
        if (answer.replayed) result.replayed++;
        result.rows.push({ row: row.row, id: answer.message.id });
      } else {
        result.rejected++;
        const field = typeof answer.error.details?.field === 'string' ? ` (${answer.error.details.field})` : '';
        result.rows.push({ row: row.row, error: { code: answer.error.code, message: `${answer.error.message}${field}` } });
      }
      bar.update(counts());
    }
  } finally {
    process.removeListener('SIGINT', interrupted);
    bar.stop();
  }
  return result;
}
