/**
 * The connection cap per client: a twentieth of the places by default (half let two addresses take
 * them all), and an IPv6 client counted by its /64 (one client may use any of its 2^64 addresses).
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { capConnections, clientOf, maxPerAddressFor } from '../src/api/http-limits.js';

const limits = { headersTimeoutMs: 1, requestTimeoutMs: 1, keepAliveTimeoutMs: 1, maxRequestsPerSocket: 1, maxConnections: undefined, maxConnectionsPerAddress: undefined };

/**
 * A listening server as capConnections sees it: connections arrive, and one over its share is
 * refused at once (answered and ended, or destroyed) without reaching the HTTP server.
 */
function serverWithCaps(max: number, perClient: number): { open(address: string): { destroyed: boolean; answer: string; close(): void } } {
  const server = new EventEmitter() as unknown as Server;
  capConnections(server, max, perClient);
  return {
    open(address) {
      const socket = Object.assign(new EventEmitter(), {
        remoteAddress: address,
        destroyed: false,
        answer: '',
        destroy() {
          this.destroyed = true;
        },
        resume() {},
        end(data?: string) {
          this.answer = data ?? '';
          this.destroyed = true;
        },
      });
      server.emit('connection', socket as unknown as Socket);
      return { get destroyed() { return socket.destroyed; }, get answer() { return socket.answer; }, close: () => socket.emit('close') };
    },
  };
}

describe('the connection share of one client', () => {
  test('by default one address holds 50 of 1,000 places: twenty addresses, not two, to fill the process', () => {
    assert.equal(maxPerAddressFor(limits, 1_000, false), 50);
    assert.equal(maxPerAddressFor(limits, 192, false), 10);
    assert.equal(maxPerAddressFor(limits, 6, false), 1);
    assert.equal(maxPerAddressFor(limits, 1_000, true), 0, 'behind a trusted proxy: no cap per address');
    assert.equal(maxPerAddressFor({ ...limits, maxConnectionsPerAddress: 500 }, 1_000, false), 500, 'HTTP_MAX_CONNECTIONS_PER_ADDRESS when set');
    // Two addresses at their share leave 900 places for everyone else.
    const server = serverWithCaps(1_000, maxPerAddressFor(limits, 1_000, false));
    for (const address of ['198.51.100.7', '203.0.113.9']) {
      const held = Array.from({ length: 600 }, () => server.open(address));
      assert.equal(held.filter((c) => !c.destroyed).length, 50, address);
      // Each one over the share is told why (503 with Retry-After), not reset without a word.
      assert.match(held.at(-1)!.answer, /^HTTP\/1\.1 503 [\s\S]*Retry-After: \d+\r\n[\s\S]*"code":"service_unavailable"/);
    }
  });

  test('IPv6 clients are counted by their /64: a new address in the same /64 is the same client', () => {
    assert.equal(clientOf('2001:db8:1:2:aaaa:bbbb:cccc:dddd'), '2001:db8:1:2::/64');
    assert.equal(clientOf('2001:db8:1:2::1'), '2001:db8:1:2::/64');
    assert.equal(clientOf('2001:0db8:0001:0002:0:0:0:0'), '2001:db8:1:2::/64');
    assert.equal(clientOf('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(clientOf('::a:b:c:d:1.2.3.4'), '0:0:a:b::/64');
    assert.equal(clientOf('::1'), '0:0:0:0::/64');
    assert.equal(clientOf('fe80::1%eth0'), 'fe80:0:0:0::/64');
    assert.equal(clientOf('::ffff:192.0.2.1'), '192.0.2.1', 'an IPv4-mapped address is its IPv4 address');
    assert.equal(clientOf('192.0.2.1'), '192.0.2.1');

    const server = serverWithCaps(1_000, 3);
    const sameClient = Array.from({ length: 10 }, (_, i) => server.open(`2001:db8:1:2::${(i + 1).toString(16)}`));
    assert.equal(sameClient.filter((c) => !c.destroyed).length, 3, 'ten addresses of one /64 hold three places');
    assert.equal(server.open('2001:db8:1:3::1').destroyed, false, 'the next /64 is another client');
    // A place given back is a place for that /64 again.
    sameClient[0]!.close();
    assert.equal(server.open('2001:db8:1:2::ffff').destroyed, false);
    assert.equal(server.open('2001:db8:1:2::fffe').destroyed, true);
  });
});
