/** Telegram's answers meaning the authorization is gone (logged out from the phone, revoked, account deleted). */
export const REVOKED = new Set(['AUTH_KEY_UNREGISTERED', 'SESSION_REVOKED', 'AUTH_KEY_INVALID', 'USER_DEACTIVATED', 'USER_DEACTIVATED_BAN', 'SESSION_EXPIRED']);
