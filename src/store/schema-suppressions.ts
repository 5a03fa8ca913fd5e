/** One recipient an account must never write to (migration 029_suppressions). */
export interface SuppressionsTable {
  /** sup_… */
  id: string;
  account_id: string;
  env: string;
  /** A platform's name, or "*" for every platform. */
  platform: string;
  /** The recipient as compared (core/recipient-key.ts), and as the list shows it. */
  recipient_key: string;
  /** api | reply | import | dashboard */
  source: string;
  /** The reply that opted the recipient out (source `reply`); null otherwise. */
  reply_id: string | null;
  note: string | null;
  created_at: number;
}

/** How an account hears opt-outs by reply; no row: on, with the built-in keywords only. */
export interface OptOutSettingsTable {
  account_id: string;
  env: string;
  /** 1 on, 0 off. */
  enabled: number;
  /** A JSON array of the account's own keywords, folded. */
  keywords: string;
  updated_at: number;
}
