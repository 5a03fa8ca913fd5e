import path from 'node:path';
import type { CreatedAccount } from '../admin/accounts.js';
import type { Config } from '../config.js';
import { describeStorage } from './storage.js';

const RULE = '='.repeat(78);

/**
 * The owner's keys and login as one framed block, for stderr: apart from the JSON log lines on
 * stdout (which a log collector keeps), so the secrets are seen once by a person and not archived.
 */
export function firstStartBanner(owner: CreatedAccount, config: Config): string {
  const keyAdvice = config.secretKey
    ? 'Keep SECRET_KEY: the stored platform credentials cannot be read without it.'
    : `Keep ${path.join(config.dataDir, 'secret.key')} (and back it up apart from the database):\nthe stored platform credentials cannot be read without it.`;
  return [
    RULE,
    'voicenote: first start. Created the owner account; these are shown ONCE, store them now.',
    '',
    `account          ${owner.account.id}  (${owner.account.name}, plan ${owner.account.plan})`,
    `sandbox key      ${owner.testKey.row.id}  ${owner.testKey.secret}`,
    `live key         ${owner.liveKey.row.id}  ${owner.liveKey.secret}`,
    `dashboard login  ${owner.account.email ?? ''}  password ${owner.generatedPassword ?? ''}`,
    ...(config.ownerEmail === undefined ? ['                 (OWNER_EMAIL, set before a first start, chooses this email)'] : []),
    `data             ${describeStorage(config)}`,
    '',
    keyAdvice,
    RULE,
    '',
  ].join('\n');
}
