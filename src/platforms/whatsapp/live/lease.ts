import { claimSession, findOrphanedSessions, findSessionById, releaseLease, renewLeases } from '../../../store/whatsapp-live.js';
import { openAuthValue } from '../auth-state.js';
import type { AuthCreds } from '../socket.js';
import type { Connections } from './connection.js';
import type { LiveContext, Link } from './context.js';

/**
 * Ownership: which process holds a session's socket, through a renewed lease in the database (an
 * affinity lease, so the session's messages are claimed by this process's worker). A process with a
 * delivery worker takes over sessions whose lease is free or ran out, restoring them from the database.
 */
export function createLeases(ctx: LiveContext, connections: () => Connections) {
  const { db, secretBox, tuning, links, holderId, logger, state } = ctx;
  const log = (id: string) => ctx.log(id);
  const dropLink: Connections['dropLink'] = (link, how) => connections().dropLink(link, how);
  const newLink: Connections['newLink'] = (id, creds) => connections().newLink(id, creds);
  const connect: Connections['connect'] = (link) => connections().connect(link);
  let renewTimer: NodeJS.Timeout | undefined;
  let scanTimer: NodeJS.Timeout | undefined;
  let scanning: Promise<void> | undefined;
  const restoring = new Map<string, Promise<Link | undefined>>();

  function ensureRenewing(): void {
    if (renewTimer || state.stopped) return;
    renewTimer = setInterval(() => void renew(), tuning.renewMs);
    renewTimer.unref();
  }

  async function renew(): Promise<void> {
    const ids = [...links.keys()];
    if (ids.length === 0) return;
    let held: Set<string>;
    try {
      held = await renewLeases(db, holderId, ids, Date.now() + tuning.leaseMs);
    } catch (err) {
      logger.warn({ err }, 'could not renew WhatsApp session leases');
      return;
    }
    for (const id of ids) {
      const link = links.get(id);
      if (link && held.has(id)) {
        // A proxy changed in another process (PATCH /senders/{id}) applies from here too.
        await connections().followProxyChange(link).catch((err: unknown) => log(id).warn({ err }, 'could not follow a change of the session\'s proxy'));
        continue;
      }
      if (!link || held.has(id)) continue;
      // Deleted while we held it (DELETE answered by another process): unlink the device as DELETE promises.
      const row = await findSessionById(db, id).catch(() => null);
      if (row === undefined) await dropLink(link, { logout: true, release: false });
      else if (row !== null) {
        log(id).warn('lost the lease of a WhatsApp session; another process holds it now');
        await dropLink(link, { release: false });
      }
    }
  }

  function onLeaseLost(id: string): void {
    const link = links.get(id);
    if (link) {
      log(id).warn('a write found the WhatsApp session held by another process; letting it go');
      void dropLink(link, { release: false });
    }
  }

  /** Claims a free session and reconnects it from the stored auth state. Undefined when it cannot. */
  function restore(id: string): Promise<Link | undefined> {
    const existing = links.get(id);
    if (existing) return Promise.resolve(existing);
    let pending = restoring.get(id);
    if (!pending) {
      pending = (async () => {
        if (state.stopped || !(await claimSession(db, id, holderId, Date.now(), tuning.leaseMs))) return undefined;
        const row = await findSessionById(db, id);
        if (!row || row.auth_state === null || row.env !== 'live') {
          await releaseLease(db, id, holderId);
          return undefined;
        }
        let creds: AuthCreds;
        try {
          creds = await openAuthValue<AuthCreds>(secretBox, row.auth_state);
        } catch (err) {
          log(id).error({ err }, 'the stored WhatsApp creds cannot be opened (was SECRET_KEY changed?)');
          await releaseLease(db, id, holderId);
          return undefined;
        }
        log(id).info('taking over WhatsApp session');
        const link = newLink(id, creds);
        await connect(link);
        return link;
      })().finally(() => restoring.delete(id));
      restoring.set(id, pending);
    }
    return pending;
  }

  async function scan(): Promise<void> {
    if (state.stopped) return;
    try {
      const ids = await findOrphanedSessions(db, Date.now(), 20);
      for (const id of ids) {
        if (state.stopped) break;
        if (!links.has(id)) await restore(id);
      }
    } catch (err) {
      logger.warn({ err }, 'could not look for WhatsApp sessions to take over');
    }
  }

  function serveDeliveries(): void {
    if (state.serving || state.stopped) return;
    state.serving = true;
    const tick = (): void => {
      scanning = scan().finally(() => {
        scanning = undefined;
      });
    };
    scanTimer = setInterval(tick, tuning.takeoverScanMs);
    scanTimer.unref();
    tick();
  }

  /** Stops renewing and looking for sessions; waits for a look or a takeover under way. */
  async function stopTaking(): Promise<void> {
    clearInterval(renewTimer);
    clearInterval(scanTimer);
    await scanning;
    await Promise.allSettled([...restoring.values()]);
  }

  return { ensureRenewing, onLeaseLost, restore, serveDeliveries, stopTaking };
}
