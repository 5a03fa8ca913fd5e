import type { Api } from 'telegram';
import { isSocks, parseProxyUrl } from '../../../core/proxy-url.js';

/**
 * The edge between voicenote and the MTProto library (GramJS, npm `telegram`): the few calls a linked
 * Telegram account needs. Requests are the library's own TL objects (`new Api.messages.SendMedia({…})`),
 * so what reaches this edge is exactly what Telegram would receive; tests inject a fake factory that
 * answers them (test/fakes/telegram-mtproto.ts).
 */
export interface TelegramAccountClient {
  connect(): Promise<void>;
  /** Sends one TL request; rejects with the library's RPC errors (`errorMessage`, and `seconds` for FLOOD_WAIT). */
  invoke<R extends Api.AnyRequest>(request: R): Promise<R['__response']>;
  /** Moves the connection to another data centre (a login token that says LoginTokenMigrateTo). */
  switchDc(dcId: number): Promise<void>;
  /** The authorization to keep (auth key and data centre), opaque: the caller seals it. */
  exportSession(): string;
  /**
   * Every update Telegram pushes on this connection, as the library hands them on: the updates inside an
   * `updates` or `updateShort` container one by one (GramJS `client/updates.js`, `_handleUpdate`).
   */
  onUpdate(handler: (update: unknown) => void): void;
  /**
   * The library reconnected by itself after the connection dropped. Telegram pushes nothing of what
   * happened meanwhile (GramJS has no gap recovery: `catchUp()` is a TODO in `client/updates.js`).
   */
  onReconnected(handler: () => void): void;
  /** The server's clock (epoch ms): the local one corrected by the time offset the library learned from Telegram. */
  serverNow(): number;
  disconnect(): Promise<void>;
}

export interface TelegramClientOptions {
  apiId: number;
  apiHash: string;
  /** A stored authorization (what exportSession gave), or none to start a new one. */
  session?: string;
  /**
   * FLOOD_WAITs up to this many seconds are slept through inside `invoke` (GramJS `client/users.js`;
   * its default is 60). Sleeping there holds the account's queue and ignores an attempt's abort, so
   * voicenote passes 0: every wait comes back as the error and rests the sender instead.
   */
  floodSleepThreshold: number;
  /**
   * The account's SOCKS5 proxy in GramJS's shape (its `ProxyInterface`, network/connection/TCPMTProxy.d.ts):
   * every MTProto connection goes through it (extensions/PromisedNetSockets.js hands it to the `socks`
   * package; without it the socket connects directly). None: direct.
   */
  proxy?: GramjsSocksProxy;
}

/** GramJS's `SocksProxyType`: `ip` may be a name (the `socks` package resolves the proxy's own host). */
export interface GramjsSocksProxy {
  ip: string;
  port: number;
  socksType: 5;
  username?: string;
  password?: string;
  /** Seconds GramJS waits for the proxy (its default is 5). */
  timeout?: number;
}

/**
 * A SOCKS5 proxy URL (checked: connection-proxy.ts) in GramJS's shape. Telegram's data centres are
 * addresses, not names, so socks5:// and socks5h:// mean the same here. Undefined for none.
 */
export function gramjsProxyOf(url: string | null, timeoutSeconds = 10): GramjsSocksProxy | undefined {
  if (url === null) return undefined;
  const proxy = parseProxyUrl(url);
  if ('problem' in proxy || !isSocks(proxy)) throw new Error("the account's proxy is not a SOCKS5 proxy");
  return {
    ip: proxy.host,
    port: proxy.port,
    socksType: 5,
    ...(proxy.username !== null ? { username: proxy.username, password: proxy.password ?? '' } : {}),
    timeout: timeoutSeconds,
  };
}

/** No FLOOD_WAIT is slept through inside the library (see TelegramClientOptions.floodSleepThreshold). */
export const FLOOD_SLEEP_THRESHOLD = 0;

export type TelegramClientFactory = (options: TelegramClientOptions) => TelegramAccountClient;

/** Telegram's own name of an RPC error: `FLOOD_WAIT_30`, `SESSION_PASSWORD_NEEDED`… (undefined for other errors). */
export function rpcErrorName(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { errorMessage, seconds } = error as { errorMessage?: unknown; seconds?: unknown };
  if (typeof errorMessage !== 'string') return undefined;
  // GramJS turns FLOOD_WAIT_X into a FloodWaitError whose errorMessage is "FLOOD" and keeps X apart.
  if (errorMessage === 'FLOOD' && typeof seconds === 'number') return `FLOOD_WAIT_${seconds}`;
  return errorMessage;
}

let library: Promise<typeof import('telegram')> | undefined;
/** GramJS, loaded the first time a Telegram account is used: most processes never link one. */
export const loadTelegram = (): Promise<typeof import('telegram')> => (library ??= import('telegram'));
