// Hashing lives with the accounts it protects (src/store/password-hash.ts); the dashboard uses the
// asynchronous forms and these length bounds.
export { hashPasswordAsync, needsRehash, scryptParameters, verifyPasswordAsync } from '../store/password-hash.js';

export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;
