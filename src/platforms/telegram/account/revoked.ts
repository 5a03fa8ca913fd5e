/**
 * Telegram's answers meaning the authorization is gone (logged out from the phone, revoked, account
 * deleted). AUTH_KEY_DUPLICATED: the key was used by two connections at once, and Telegram drops it for
 * good (core.telegram.org/api/errors, 406): the account must be linked again.
 */
export const REVOKED = new Set(['AUTH_KEY_UNREGISTERED', 'SESSION_REVOKED', 'AUTH_KEY_INVALID', 'USER_DEACTIVATED', 'USER_DEACTIVATED_BAN', 'SESSION_EXPIRED', 'AUTH_KEY_DUPLICATED']);
