import { Command } from 'commander';
import { bootstrapOwner } from '../admin/accounts.js';
import { createLogger } from '../logger.js';
import { firstStartBanner } from './first-start.js';
import { migrate, openDb } from '../store/db.js';
import { checkSecretKey } from '../store/key-check.js';
import { scryptParameters } from '../store/password-hash.js';
import { SecretBox } from '../core/secret-box.js';
import { loadOrCreateSecretKey } from '../secret-key.js';
import { CliError, out, messageOf, storageFailure, config } from './common.js';
import { noticeCreated, sqliteExists } from './storage.js';

/**
 * Stops on SIGTERM/SIGINT with `stop`, exit 0 once it has finished. After `graceMs` (deliveries in hand
 * finishing) plus `marginMs` (aborts, then closing connections) the process ends regardless, exit 1.
 */
function onSignals(stop: () => Promise<void>, { graceMs, marginMs }: { graceMs: number; marginMs: number }): void {
  let stopping = false;
  const handler = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`voicenote: ${signal} received, shutting down\n`);
    // A hard deadline: whatever hangs (a platform that never answers, a socket that never closes), the
    // process ends. Leases still held then run out and other workers take those messages.
    setTimeout(() => {
      process.stderr.write(`voicenote: shutdown did not finish in time (SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS = ${graceMs + marginMs} ms); exiting with code 1\n`);
      process.exit(1);
    }, graceMs + marginMs).unref();
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`voicenote: shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => handler('SIGTERM'));
  process.once('SIGINT', () => handler('SIGINT'));
}

/** `serve`, `worker`, `migrate`: the processes of the service. */
export function registerProcessCommands(program: Command): void {
  program
    .command('serve')
    .description('run the HTTP API (and the delivery worker, unless --no-worker)')
    .option('--no-worker', 'do not run the delivery worker in this process')
    .action(async (options: { worker: boolean }) => {
      const cfg = config();
      const logger = createLogger(cfg.logLevel);
      const { createApp } = await import('../app.js');
      const app = await createApp(cfg, { worker: options.worker, logger }).catch((error: unknown) => {
        throw storageFailure(cfg, error);
      });
      onSignals(() => app.close(), { graceMs: cfg.shutdownGraceMs, marginMs: cfg.shutdownMarginMs });
      let address: string;
      try {
        address = await app.server.app.listen({ port: cfg.port, host: cfg.host });
      } catch (error) {
        await app.close().catch(() => undefined);
        throw new CliError(`PORT/HOST: cannot listen on ${cfg.host}:${cfg.port}: ${messageOf(error)}`);
      }
      // Only once the service is up: a start that failed leaves no owner behind whose keys were never shown.
      const owner = await bootstrapOwner(app.services.db.kysely, cfg.ownerEmail, scryptParameters(cfg.passwordHashCost));
      if (owner) process.stderr.write(firstStartBanner(owner, cfg));
      logger.info({ address, worker: options.worker, storage: app.services.db.dialect }, 'voicenote is listening');
    });

  program
    .command('worker')
    .description('run only the delivery worker')
    .action(async () => {
      const cfg = config();
      const { openServices, startWorker } = await import('../app.js');
      const opened = await openServices(cfg, { logger: createLogger(cfg.logLevel) }).catch((error: unknown) => {
        throw storageFailure(cfg, error);
      });
      const running = startWorker(opened.services);
      opened.attachWorker(running.worker);
      opened.services.logger.info({ storage: opened.services.db.dialect }, 'voicenote worker started');
      onSignals(async () => {
        await running.stop();
        await opened.close();
      }, { graceMs: cfg.shutdownGraceMs, marginMs: cfg.shutdownMarginMs });
    });

  program
    .command('migrate')
    .description('apply pending database migrations')
    .action(async () => {
      // Not withDb: it migrates first, and this command should report what it applied itself.
      const cfg = config();
      const existed = sqliteExists(cfg);
      const db = await openDb({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir }).catch((error: unknown) => {
        throw storageFailure(cfg, error);
      });
      if (!existed) noticeCreated(cfg);
      let applied: string[];
      try {
        applied = await migrate(db).catch((error: unknown) => {
          throw storageFailure(cfg, error);
        });
        // The key check is stored (or verified) here too, so a database is bound to its key from the start.
        await checkSecretKey(db.kysely, new SecretBox(loadOrCreateSecretKey(cfg.dataDir, cfg.secretKey)));
      } finally {
        await db.close();
      }
      out(applied.length === 0 ? 'database is up to date' : `applied ${applied.join(', ')}`);
    });
}
