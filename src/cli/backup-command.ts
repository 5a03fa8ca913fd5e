import fs from 'node:fs';
import { Command } from 'commander';
import { backupSqlite } from './backup.js';
import { counted } from './plural.js';
import { out, json, config } from './common.js';

/** `backup <file>`: a consistent copy of the embedded SQLite database. */
export function registerBackupCommand(program: Command): void {
  program
    .command('backup <file>')
    .description('a consistent copy of the embedded SQLite database, safe while the service runs')
    .option('--json', 'print one JSON object')
    .action(async (file: string, options: { json?: boolean }) => {
      const report = await backupSqlite(config(), file);
      if (options.json) {
        json(report);
        return;
      }
      out(`backed up ${report.database} to ${report.file} (${counted(report.accounts, 'account')}, ${counted(report.messages, 'message')}, ${counted(report.bytes, 'byte')})`);
      out(
        report.secret_key === 'SECRET_KEY'
          ? 'To read it you also need this environment\'s SECRET_KEY: keep it, apart from the backup.'
          : fs.existsSync(report.secret_key)
            ? `To read it you also need ${report.secret_key} (not copied): keep it, apart from the backup.`
            : `To read its sealed credentials you need the key that was at ${report.secret_key}, which is not there now: find it, or queued messages and WhatsApp sessions cannot be used.`,
      );
    });
}
