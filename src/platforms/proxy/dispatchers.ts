import type { Dispatcher } from 'undici';
import { Agent } from '../../core/http-client.js';
import { parseProxyUrl } from '../../core/proxy-url.js';
import { DeliveryError } from '../platform.js';
import { proxyFailureOf } from './tunnel.js';
import { proxiedAgent } from './undici-agent.js';

/**
 * One undici Agent per proxy for an adapter's HTTP calls (docs/proxies.md): every connection it opens is
 * a tunnel through that proxy, so two senders with two proxies never share a connection, and a sender
 * whose proxy fails gets the failure, never a direct connection.
 */

type AgentOptions = ConstructorParameters<typeof Agent>[0];

// Enough for every sender a process serves at once; the oldest is closed past it (made again when needed).
const MAX_AGENTS = 512;

/** An adapter's dispatchers: its own direct one for senders without a proxy, one per proxy for the others. */
export class ProxyDispatchers {
  readonly #agents = new Map<string, Agent>();

  constructor(
    readonly direct: Dispatcher,
    private readonly options: AgentOptions & { connectTimeoutMs?: number } = {},
  ) {}

  /** The dispatcher for a sender's proxy URL (credentials included: this map lives in memory only); the direct one for none. */
  for(proxyUrl: string | null | undefined): Dispatcher {
    if (!proxyUrl) return this.direct;
    let agent = this.#agents.get(proxyUrl);
    if (agent) {
      // Most recently used last, so the oldest is the first to go.
      this.#agents.delete(proxyUrl);
      this.#agents.set(proxyUrl, agent);
      return agent;
    }
    const proxy = parseProxyUrl(proxyUrl);
    if ('problem' in proxy) throw new DeliveryError('proxy_unreachable', `the sender's proxy cannot be used: ${proxy.problem}`, false);
    agent = proxiedAgent(proxy, this.options);
    this.#agents.set(proxyUrl, agent);
    if (this.#agents.size > MAX_AGENTS) {
      const [oldestUrl, oldest] = this.#agents.entries().next().value as [string, Agent];
      this.#agents.delete(oldestUrl);
      void oldest.close().catch(() => undefined);
    }
    return agent;
  }
}

/** A failure of the sender's proxy as the note's failure: tried again as any transient fault, named by the proxy's host, never its password. */
export function proxyDeliveryError(error: unknown): DeliveryError | undefined {
  const failure = proxyFailureOf(error);
  return failure ? new DeliveryError('proxy_unreachable', failure.message, true) : undefined;
}
