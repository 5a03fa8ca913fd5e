// Events are written by the store's transactional outbox (store/webhook-outbox.ts), in the transaction of
// what they report; re-exported here for the webhook side.
export * from '../store/webhook-outbox.js';
