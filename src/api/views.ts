// The API's views of rows live in core/public-views.ts, below every layer that shows them (the store's
// webhook outbox among them); re-exported here for the routes.
export { iso, messageStatusView, sentMessageView, whatsappSessionListItemView, whatsappSessionView } from '../core/public-views.js';
