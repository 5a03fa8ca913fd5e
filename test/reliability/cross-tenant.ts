/**
 * R6 (RELIABILITY.md): every id-taking operation of the served OpenAPI document, called with the ids
 * of another account and of the other environment, must answer 404 — and change nothing. Shared by
 * the suite (test/reliability-ids.test.ts) and bench/reliability/r6-foreign-ids.ts.
 */

export interface Caller {
  /** Base URL or '' for inject. */
  request(method: string, url: string, key: string, body?: unknown): Promise<{ status: number; body: string }>;
}

export interface Owned {
  label: string;
  key: string;
  /** Ids of this account and environment, by the path parameter they fill. */
  ids: Record<string, string[]>;
}

export interface ForeignIdResult {
  calls: number;
  notFound: number;
  others: string[];
  operations: string[];
}

const BODY_FOR: Record<string, unknown> = {
  simulate: { event: 'disconnect' },
  password: { password: 'not-the-password' },
  roll_secret: { previous_secret_expires_in: 0 },
  test: {},
  // PATCH /senders/{sender_id}: a change that is valid, so only the id can refuse it.
  '{sender_id}': { proxy: null },
};

/** Calls every templated operation with `victim`'s ids under each attacker's key; all must be 404. */
export async function callWithForeignIds(
  caller: Caller,
  operations: { method: string; template: string }[],
  victim: Owned,
  attackers: { label: string; key: string }[],
): Promise<ForeignIdResult> {
  const result: ForeignIdResult = { calls: 0, notFound: 0, others: [], operations: [] };
  for (const op of operations) {
    const params = op.template.match(/\{[^}]+\}/g)?.map((p) => p.slice(1, -1)) ?? [];
    if (params.length === 0) continue;
    const choices = params.map((p) => victim.ids[p] ?? Object.values(victim.ids).flat());
    if (choices.some((c) => c.length === 0)) continue;
    result.operations.push(`${op.method} ${op.template}`);
    const last = op.template.split('/').pop() ?? '';
    for (const attacker of attackers) {
      // Every combination would explode with two parameters; the first id of each is enough to be foreign.
      let i = 0;
      const url = op.template.replace(/\{[^}]+\}/g, () => encodeURIComponent(choices[i++]![0]!));
      const res = await caller.request(op.method, url, attacker.key, op.method === 'POST' || op.method === 'PATCH' ? (BODY_FOR[last] ?? {}) : undefined);
      result.calls++;
      if (res.status === 404) result.notFound++;
      else result.others.push(`${attacker.label} → ${op.method} ${url} (${victim.label}'s id): ${res.status} ${res.body.slice(0, 160)}`);
    }
  }
  return result;
}
