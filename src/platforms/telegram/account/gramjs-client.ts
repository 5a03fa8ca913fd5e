import type { TelegramAccountClient, TelegramClientFactory } from './client.js';
import { loadTelegram } from './client.js';

/**
 * The real client: a GramJS TelegramClient over TCP, with a StringSession that holds the auth key and
 * data centre (exported for sealing, never written to disk by the library), its own logging off (it
 * would print to the console), and updates taken raw.
 */
export const createGramjsClientFactory = (): TelegramClientFactory => (options) => {
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
    });
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
