// Receipts are written by the store (store/receipts.ts) and, for WhatsApp, read off its live sockets
// (platforms/whatsapp/receipts.ts); re-exported here for the message log.
export { RECEIPT_KINDS, recordReceipt, savePlatformMessageId, type ReceiptKind } from '../store/receipts.js';
export { receiptKindOfWhatsappStatus, recordWhatsappStatusUpdates } from '../platforms/whatsapp/receipts.js';
