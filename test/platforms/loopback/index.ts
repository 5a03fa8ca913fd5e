/**
 * A fourth platform that exists only in the test suite: everything that is this platform's lives in
 * this folder (rules, audio target, adapter, its "server"), and the suite registers it through the
 * app's registry hook. It proves a platform needs its folder and one registry entry, nothing else.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { OGG_OPUS_VOICE } from '../../../src/audio/targets.js';
import { DeliveryError, type PlatformDefinition } from '../../../src/platforms/platform.js';
import { isViolation, stringField } from '../../../src/platforms/rules.js';

/** What the loopback server received: one voice note per POST. */
export interface LoopbackDelivery {
  messageId: string;
  recipient: string;
  mailbox: string;
  mimeType: string;
  seconds: number;
  bytes: Buffer;
}

export interface LoopbackPlatform {
  definition: PlatformDefinition;
  received: LoopbackDelivery[];
  close(): Promise<void>;
}

const RECIPIENT = /^loop-[a-z0-9]{1,20}$/;
const MAILBOX = /^box_[a-z0-9]{4,}$/;

/** Starts the loopback "service" (an HTTP server on 127.0.0.1) and the platform that delivers to it. */
export async function startLoopbackPlatform(): Promise<LoopbackPlatform> {
  const received: LoopbackDelivery[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://loopback');
      const seconds = Number(req.headers['x-seconds']);
      // As strict as a real service: the voice note must come whole and declared.
      if (req.method !== 'POST' || url.pathname !== '/notes' || req.headers['content-type'] !== OGG_OPUS_VOICE.mimeType || !(seconds >= 1)) {
        res.writeHead(400).end('bad request');
        return;
      }
      received.push({
        messageId: String(req.headers['x-message-id']),
        recipient: String(url.searchParams.get('to')),
        mailbox: String(req.headers['x-mailbox']),
        mimeType: String(req.headers['content-type']),
        seconds,
        bytes: Buffer.concat(chunks),
      });
      res.writeHead(201, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const definition: PlatformDefinition = {
    name: 'loopback',
    audio: { ...OGG_OPUS_VOICE, maxBytes: 1024 * 1024, maxDurationSeconds: 30 },
    maxCaptionLength: null,
    checkRecipient: (recipient) => (RECIPIENT.test(recipient) ? null : { field: 'recipient', message: 'loopback recipient must look like loop-<letters and digits>' }),
    checkSession(session) {
      const mailbox = stringField(session, 'mailbox');
      if (isViolation(mailbox)) return mailbox;
      if (!MAILBOX.test(mailbox)) return { field: 'session.mailbox', message: 'session.mailbox must look like box_…' };
      return { platform: 'loopback', mailbox };
    },
    createLiveAdapter: () => ({
      async deliver(job) {
        const bytes = await readFile(job.audio.path);
        const res = await fetch(`${root}/notes?to=${encodeURIComponent(job.recipient)}`, {
          method: 'POST',
          headers: {
            'content-type': job.audio.mimeType,
            'x-message-id': job.messageId,
            'x-mailbox': String(job.session.mailbox),
            'x-seconds': String(Math.max(1, Math.round(job.audio.durationSeconds))),
          },
          body: bytes,
        });
        await res.arrayBuffer();
        if (res.status !== 201) throw new DeliveryError('platform_error', `loopback answered ${res.status}`, false);
      },
    }),
  };
  return { definition, received, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
