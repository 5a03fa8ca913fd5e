import { InvalidArgumentError, Option, type Command } from 'commander';
import { MAX_DAILY_CAP, parseWarmup } from '../core/rhythm.js';
import { builtInPlatform, PLATFORM_NAMES } from '../platforms/registry.js';
import { findAccount } from '../store/accounts.js';
import type { Db } from '../store/db.js';
import { parseWindowText, windowText, type SendWindow } from '../core/send-window.js';
import { findRhythm, saveRhythm } from '../store/rhythm.js';
import { saveSendWindow } from '../store/send-windows.js';
import { applyRhythmChange, rhythmView, type RhythmView } from '../store/rhythm-view.js';

/** What the rhythm commands borrow from the CLI: storage, output, and its one-line failure. */
export interface RhythmCliDeps {
  withDb<T>(work: (db: Db) => Promise<T>): Promise<T>;
  out(line: string): void;
  json(value: unknown): void;
  fail(message: string): Error;
}

function parsePlatform(value: string): string {
  if (!PLATFORM_NAMES.includes(value)) throw new InvalidArgumentError(`platform must be one of ${PLATFORM_NAMES.join(', ')}`);
  return value;
}

/** A sender's kind from its key, by the platform's own rule (a Telegram ts_ session is an account, else a bot). */
function kindOptions(platform: string): { kindOf?: (senderKey: string) => string } {
  const kindOf = builtInPlatform(platform).senderKind;
  return kindOf ? { kindOf } : {};
}

function parseCap(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > MAX_DAILY_CAP) throw new InvalidArgumentError(`must be a whole number from 1 to ${MAX_DAILY_CAP}`);
  return Number(value);
}

function parseWarmupOption(value: string): { start: number; days: number } {
  const warmup = parseWarmup(value);
  if (!warmup) throw new InvalidArgumentError('must be START:DAYS, e.g. 5:7 (5 notes on the first day, rising to the cap over 7 days)');
  return warmup;
}

function parseWindowOption(value: string): SendWindow {
  const window = parseWindowText(value);
  if (typeof window === 'string') throw new InvalidArgumentError(window);
  return window;
}

/** "at most 15 a day (UTC), warm-up from 5 a day over 7 days" */
function rhythmText(r: { daily_cap: number | null; warmup: { start: number; days: number } | null }): string {
  const cap = r.daily_cap === null ? 'no daily cap' : `at most ${r.daily_cap} a day (UTC)`;
  return `${cap}${r.warmup ? `, warm-up from ${r.warmup.start} a day over ${r.warmup.days} days` : ''}`;
}

/** The platform, then each kind of sender with the rhythm in force for it (the defaults differ by kind), then today's senders. */
function describe(view: RhythmView): string[] {
  const lines = [`${view.platform.padEnd(8)} (${view.source === 'default' ? 'the default' : "this account's setting"})`];
  for (const k of view.applies_to) lines.push(`         ${k.kind}: ${rhythmText(k)}`);
  if (view.send_window) lines.push(`         send window: ${windowText(view.send_window)}`);
  for (const s of view.senders) lines.push(`         sender ${s.sender}: ${s.sent_today} today${s.allowed_today === null ? '' : ` of ${s.allowed_today}`}, first seen ${s.first_day}`);
  return lines;
}

/** `voicenote rhythm show|set`: each sender's daily cap and warm-up, per account and platform. */
export function registerRhythmCommands(program: Command, deps: RhythmCliDeps): void {
  const rhythm = program.command('rhythm').description("each sender's daily cap and warm-up (live sends), and the send window notes keep to");
  rhythm
    .command('show')
    .description("an account's daily caps and warm-ups, and what each sender sent today")
    .requiredOption('--account <id>', 'the account')
    .addOption(new Option('--platform <platform>', 'one platform (default: all)').argParser(parsePlatform))
    .option('--json', 'print one JSON object')
    .action(async (options: { account: string; platform?: string; json?: boolean }) => {
      const views = await deps.withDb(async (db) => {
        if (!(await findAccount(db.kysely, options.account))) throw deps.fail(`no account ${options.account}`);
        const platforms = options.platform ? [options.platform] : [...PLATFORM_NAMES];
        return Promise.all(platforms.map((p) => rhythmView(db.kysely, options.account, p, kindOptions(p))));
      });
      if (options.json) deps.json({ account_id: options.account, rhythms: views });
      else for (const view of views) for (const line of describe(view)) deps.out(line);
    });
  rhythm
    .command('set')
    .description("set an account's daily cap, warm-up or send window on one platform")
    .requiredOption('--account <id>', 'the account')
    .addOption(new Option('--platform <platform>', 'linkedin, telegram or whatsapp').argParser(parsePlatform).makeOptionMandatory())
    .addOption(new Option('--daily-cap <n>', 'at most this many notes per sender and UTC day').argParser(parseCap))
    .option('--no-cap', 'no daily cap (and no warm-up)')
    .addOption(new Option('--warmup <start:days>', 'a new sender starts at START a day, rising to the cap over DAYS days').argParser(parseWarmupOption))
    .option('--no-warmup', 'no warm-up')
    .option('--defaults', "back to the platform's defaults (the cap and warm-up; the window stays)")
    .addOption(new Option('--window <spec>', 'notes go only then (live and sandbox), e.g. "mon-fri 09:00-18:00 Europe/Berlin"').argParser(parseWindowOption))
    .option('--no-window', 'no send window: notes go at any hour')
    .option('--json', 'print one JSON object')
    .action(
      async (options: {
        account: string;
        platform: string;
        dailyCap?: number;
        cap: boolean;
        warmup?: { start: number; days: number } | false;
        defaults?: boolean;
        window?: SendWindow | false;
        json?: boolean;
      }) => {
        if (options.dailyCap !== undefined && options.cap === false) throw deps.fail('give --daily-cap or --no-cap, not both');
        const view = await deps.withDb(async (db) => {
          if (!(await findAccount(db.kysely, options.account))) throw deps.fail(`no account ${options.account}`);
          const change = {
            ...(options.dailyCap !== undefined ? { dailyCap: options.dailyCap } : options.cap === false ? { dailyCap: null } : {}),
            ...(options.warmup !== undefined ? { warmup: options.warmup === false ? null : options.warmup } : {}),
            ...(options.defaults ? { defaults: true } : {}),
          };
          // Only a window asked for: the cap and warm-up stay as they are (the defaults stay the defaults).
          if (Object.keys(change).length > 0 || options.window === undefined) {
            const applied = applyRhythmChange(await findRhythm(db.kysely, options.account, options.platform), change);
            if ('problem' in applied) throw deps.fail(applied.problem);
            await saveRhythm(db.kysely, options.account, options.platform, applied.rhythm);
          }
          if (options.window !== undefined) await saveSendWindow(db.kysely, options.account, options.platform, options.window === false ? null : options.window);
          return rhythmView(db.kysely, options.account, options.platform, kindOptions(options.platform));
        });
        if (options.json) deps.json({ account_id: options.account, ...view });
        else for (const line of describe(view)) deps.out(line);
      },
    );
}
