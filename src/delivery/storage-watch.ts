import type { Logger } from 'pino';

/**
 * Whether storage answers, as the worker last saw it: claims, outcomes and lease renewals each report
 * here, and the change is logged once each way (not once per failed statement).
 */
export class StorageWatch {
  #down = false;
  constructor(private readonly logger: Logger) {}

  get down(): boolean {
    return this.#down;
  }

  away(err: unknown, what: string): void {
    if (this.#down) return;
    this.#down = true;
    this.logger.warn({ err }, `storage is not answering (${what}); claims pause and outcomes are kept until it returns`);
  }

  back(): void {
    if (!this.#down) return;
    this.#down = false;
    this.logger.info('storage answers again; claiming resumes');
  }
}
