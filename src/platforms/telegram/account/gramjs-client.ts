import type { TelegramAccountClient, TelegramClientFactory } from './client.js';
import { loadTelegram } from './client.js';

// GramJS's first data centre (telegram/client/telegramBaseClient.js: DEFAULT_DC_ID 4, DEFAULT_IPV4_IP, port 80 without WSS).
const DEFAULT_DC = { host: '149.154.167.91', port: 80 };

/**
 * The real client: a GramJS TelegramClient over TCP, with a StringSession that holds the auth key and
 * data centre (exported for sealing, never written to disk by the library), its own logging off (it
 * would print to the console), and updates taken raw. `dc`: TELEGRAM_DC_ADDRESS, where a new login
 * starts (a test's or a relay's when it is not GramJS's own).
 */
export const createGramjsClientFactory = (factoryOptions: { dc?: { host: string; port: number } } = {}): TelegramClientFactory => (options) => {
  let client: import('telegram').TelegramClient | undefined;
  const handlers: Array<(update: unknown) => void> = [];
  const reconnectHandlers: Array<() => void> = [];
  // Set once our own connect() returned: a "connected" state after that is the library reconnecting.
  let connectedOnce = false;
  const ready = (async () => {
    const telegram = await loadTelegram();
    const { StringSession } = await import('telegram/sessions/index.js');
    const { Logger, LogLevel } = await import('telegram/extensions/Logger.js');
    const { Raw } = await import('telegram/events/index.js');
    const { UpdateConnectionState } = await import('telegram/network/index.js');
    client = new telegram.TelegramClient(new StringSession(options.session ?? ''), options.apiId, options.apiHash, {
      connectionRetries: 3,
      baseLogger: new Logger(LogLevel.NONE),
      // Sessions are held by one process under a lease; no second copy of the key on disk.
      useWSS: false,
      floodSleepThreshold: options.floodSleepThreshold,
      // Through the account's SOCKS5 proxy when it has one (docs/proxies.md); GramJS never goes around it.
      ...(options.proxy ? { proxy: options.proxy } : {}),
    });
    // A new login starts at TELEGRAM_DC_ADDRESS when it is not GramJS's own (DEFAULT_DC_ID 4 is kept).
    if (!options.session && factoryOptions.dc && factoryOptions.dc.host !== DEFAULT_DC.host) client.session.setDC(4, factoryOptions.dc.host, factoryOptions.dc.port);
    client.addEventHandler((update: unknown) => {
      // MTProtoSender reports its reconnections as UpdateConnectionState (network/MTProtoSender.js, connect()).
      if (update instanceof UpdateConnectionState) {
        if (update.state === UpdateConnectionState.connected && connectedOnce) reconnectHandlers.forEach((handle) => handle());
        return;
      }
      handlers.forEach((handle) => handle(update));
    }, new Raw({}));
    return client;
  })();

  const adapter: TelegramAccountClient = {
    async connect() {
      await (await ready).connect();
      connectedOnce = true;
    },
    async invoke(request) {
      return (await ready).invoke(request);
    },
    async switchDc(dcId) {
      // GramJS moves a connection between data centres with this (its own QR login uses it).
      await ((await ready) as unknown as { _switchDC(dc: number): Promise<void> })._switchDC(dcId);
    },
    exportSession() {
      if (!client) throw new Error('the Telegram client is not connected');
      return (client.session as unknown as { save(): string }).save();
    },
    onUpdate(handler) {
      handlers.push(handler);
    },
    onReconnected(handler) {
      reconnectHandlers.push(handler);
    },
    serverNow() {
      // MTProtoState keeps the offset between Telegram's clock and ours, in seconds (network/MTProtoState.js, updateTimeOffset).
      const offset = (client as unknown as { _sender?: { _state?: { timeOffset?: number } } } | undefined)?._sender?._state?.timeOffset ?? 0;
      return Date.now() + offset * 1000;
    },
    async disconnect() {
      await (await ready).destroy();
    },
  };
  return adapter;
};
