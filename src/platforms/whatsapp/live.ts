import { randomUUID } from 'node:crypto';
import { createConnections, type Connections } from './live/connection.js';
import { DEFAULTS, type LiveContext, type LiveTuning, type LiveWhatsapp, type LiveWhatsappOptions, type Link } from './live/context.js';
import { createLeases } from './live/lease.js';
import { createLinking } from './live/linking.js';
import { createSending } from './live/sending.js';

export {
  SessionNotOpenError,
  WhatsappUnavailableError,
  type Acquired,
  type HeldSession,
  type LiveCreated,
  type LiveTuning,
  type LiveWhatsapp,
  type LiveWhatsappOptions,
} from './live/context.js';

/**
 * Live WhatsApp sessions: one Baileys socket per session, owned by one process at a time through a
 * lease in the database. Pairing runs in the process that answered POST /whatsapp/sessions; connected
 * sessions live in processes that run a delivery worker, which take over any session whose lease is
 * free or ran out (a stopped or crashed process), restoring the auth state from the database.
 *
 * Its parts, one job each (./live/): the ownership lease (lease.ts), the socket lifecycle
 * (connection.ts), linking by QR or pairing code and unlinking (linking.ts), and sending (sending.ts).
 */
export function createLiveWhatsapp(options: LiveWhatsappOptions): LiveWhatsapp {
  const tuning: Required<LiveTuning> = { ...DEFAULTS };
  for (const [name, value] of Object.entries(options) as Array<[keyof LiveTuning, unknown]>) {
    if (name in DEFAULTS && typeof value === 'number') tuning[name] = value;
  }
  const logger = options.logger.child({ component: 'whatsapp' });
  const ctx: LiveContext = {
    tuning,
    db: options.db,
    secretBox: options.secretBox,
    socketFactory: options.socketFactory,
    logger,
    now: options.now ?? Date.now,
    holderId: `wa_${randomUUID()}`,
    onHeard: options.onHeard,
    proxies: options.proxies,
    links: new Map<string, Link>(),
    state: { serving: false, stopped: false },
    log: (id) => logger.child({ session_id: id }),
  };
  let connections: Connections | undefined;
  const leases = createLeases(ctx, () => connections!);
  connections = createConnections(ctx, leases);
  const linking = createLinking(ctx, connections);
  const sending = createSending(ctx, connections, leases.restore);
  const { dropLink, followProxyChange } = connections;

  return {
    holderId: ctx.holderId,
    create: linking.create,
    remove: linking.remove,
    serveDeliveries: leases.serveDeliveries,
    acquire: sending.acquire,
    async proxyChanged(sessionId) {
      const link = ctx.links.get(sessionId);
      if (link) await followProxyChange(link);
    },
    async stop(opts = {}) {
      if (ctx.state.stopped) return;
      ctx.state.stopped = true;
      await leases.stopTaking();
      const release = opts.release ?? true;
      await Promise.allSettled([...ctx.links.values()].map((link) => dropLink(link, { release })));
    },
  };
}
