/**
 * The command line: each group of commands lives in its own module under src/cli/ (processes, accounts,
 * keys, send, rhythm, backup); this file builds the program from them and runs it.
 */
import { Command, CommanderError } from 'commander';
import { ConfigError } from './config.js';
import { BackupFailure } from './cli/backup.js';
import { Unreachable } from './cli/http.js';
import { SendFailure } from './cli/send.js';
import { registerRhythmCommands } from './cli/rhythm.js';
import { packageVersion } from './package-info.js';
import { registerAccountCommands } from './cli/account-commands.js';
import { registerBackupCommand } from './cli/backup-command.js';
import { registerKeyCommands } from './cli/key-commands.js';
import { registerMcpCommand } from './cli/mcp-command.js';
import { registerProcessCommands } from './cli/process-commands.js';
import { registerSendCommand } from './cli/send-command.js';
import { registerSenderCommands } from './cli/senders.js';
import { registerMessageCommands } from './cli/message-commands.js';
import { registerTelegramSessionCommands } from './cli/telegram-sessions-command.js';
import { registerSuppressionCommands } from './cli/suppressions-command.js';
import { CliError, out, json, withDb, config } from './cli/common.js';

export function buildProgram(): Command {
  const program = new Command('voicenote')
    .description('Voice notes on LinkedIn, Telegram and WhatsApp through one HTTP API')
    .version(packageVersion(), '-V, --version', 'print the version')
    .exitOverride()
    .configureOutput({
      writeErr: (text) => process.stderr.write(text),
      // A failing command prints one line: commander puts "(Did you mean …?)" on a line of its own.
      // Same prefix as the CLI's own errors, so scripts can match one pattern.
      outputError: (text, write) => write(`voicenote: ${text.trimEnd().replace(/^error: /, '').replace(/\s*\n\s*/g, ' ')}\n`),
    });

  registerProcessCommands(program);
  registerAccountCommands(program);
  registerKeyCommands(program);
  registerSendCommand(program);
  registerSenderCommands(program);
  registerMessageCommands(program);
  registerTelegramSessionCommands(program);
  registerSuppressionCommands(program);
  registerRhythmCommands(program, { withDb: (work) => withDb(config(), work), out, json, fail: (message) => new CliError(message) });
  registerBackupCommand(program);
  registerMcpCommand(program);

  return program;
}

/**
 * Last resort for true bugs: faults (storage away, a platform down) are handled where they happen, so
 * an error that reaches here is one nobody planned for. Log it and exit non-zero, so a supervisor
 * restarts a clean process; leases of messages in hand run out and other workers take them.
 */
function exitOnBugs(): void {
  const die = (kind: string) => (error: unknown) => {
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`voicenote: ${kind} (a bug): ${detail}\n`);
    process.exit(70);
  };
  process.on('uncaughtException', die('uncaught exception'));
  process.on('unhandledRejection', die('unhandled promise rejection'));
}

export async function main(argv: string[]): Promise<void> {
  exitOnBugs();
  // `voicenote accounts list | head -1`: the reader has gone, which is not a failure of the command.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0);
    throw error;
  });
  try {
    await buildProgram().parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has printed its own one-line message (or the help text) already.
      process.exit(error.exitCode === 0 ? 0 : 1);
    }
    const known = error instanceof ConfigError || error instanceof CliError || error instanceof SendFailure || error instanceof BackupFailure || error instanceof Unreachable;
    const message = known ? error.message : error instanceof Error ? error.message : String(error);
    process.stderr.write(`voicenote: ${message.split('\n')[0]}\n`);
    process.exit(1);
  }
}
