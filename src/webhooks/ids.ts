// The ids live in core/webhook-ids.ts, where the store's outbox can use them too; re-exported here.
export * from '../core/webhook-ids.js';
