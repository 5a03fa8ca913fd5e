import fc from 'fast-check';

/**
 * Generated and mutated requests over every endpoint: methods, paths (documented templates filled
 * with good, foreign and hostile ids; unknown paths), headers (keys, content types, idempotency keys,
 * request ids), bodies (valid sends, mutated sends, random JSON, non-JSON, oversized) and encodings.
 */

export interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** Raw bytes of the body; undefined sends none. */
  body: Buffer | undefined;
}

export interface FuzzContext {
  /** Documented operations, from the served OpenAPI document. */
  operations: { method: string; template: string }[];
  keys: { test: string; live: string };
  /** Ids that exist for this caller (messages, sessions), to reach the code behind a 200. */
  ids: string[];
  audioUrl: string;
}

const METHODS = ['GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'HEAD', 'OPTIONS'];
const TELEGRAM_TOKEN = '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';

const hostileSegment = fc.oneof(
  fc.constantFrom('msg_', 'ws_', 'msg_000000000000000000000000', 'ws_zzzzzzzzzzzzzzzzzzzzzzzz', '..', '.', '%2e%2e', '%00', '%ZZ', '%E0%A4%A', 'null', 'undefined', '-1', '0', '1e9'),
  fc.constantFrom('%F0%9F%8E%A4', '%C3%A9', '%2F', '%252F', ';x=1', '*', "'", '"', '<script>'),
  fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
  fc.string({ minLength: 1, maxLength: 600 }).map((s) => encodeURIComponent(s)),
);

function pathOf(template: string, segment: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const holes = template.match(/\{[^}]+\}/g) ?? [];
  if (holes.length === 0) return fc.constant(template);
  return fc.array(segment, { minLength: holes.length, maxLength: holes.length }).map((values) => {
    let i = 0;
    return template.replace(/\{[^}]+\}/g, () => values[i++] ?? 'x');
  });
}

function sendBody(ctx: FuzzContext): fc.Arbitrary<Record<string, unknown>> {
  const platform = fc.constantFrom('telegram', 'linkedin', 'whatsapp', 'TELEGRAM', 'sms', '', 'telegram ');
  const recipient = fc.oneof(
    fc.constantFrom('123456789', '-1001234567890', '@channel_name', '14155550100', 'jane-smith-a1b2c3', 'https://www.linkedin.com/in/jane', 'urn:li:fsd_profile:ACoAAB', '10000000001', '10000000004'),
    fc.string({ maxLength: 40 }),
    fc.integer(),
  );
  const audio = fc.oneof(
    fc.constant(ctx.audioUrl),
    fc.constantFrom('ftp://example.com/a.mp3', 'http://127.0.0.1/a.ogg', 'http://[::1]/x', 'javascript:alert(1)', '', `https://example.com/${'a'.repeat(2100)}`),
    fc.webUrl(),
    fc.string({ maxLength: 60 }),
  );
  const session = fc.oneof(
    fc.constant({ bot_token: TELEGRAM_TOKEN }),
    fc.constant({ li_at: 'AQEDAQNtest-cookie-value', csrf_token: 'ajax:1234567890123456789' }),
    fc.record({ session_id: fc.oneof(fc.constantFrom(...(ctx.ids.length ? ctx.ids : ['ws_x'])), fc.string()) }),
    fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
    fc.jsonValue({ maxDepth: 1 }),
  );
  return fc.record(
    {
      platform,
      recipient,
      audio_url: audio,
      session,
      duration: fc.oneof(fc.constant(null), fc.integer({ min: -5, max: 5000 }), fc.double(), fc.string({ maxLength: 5 })),
      caption: fc.oneof(fc.constant(null), fc.string({ maxLength: 30 }), fc.constant('x'.repeat(1100)), fc.integer()),
      extra: fc.jsonValue({ maxDepth: 2 }),
    },
    { requiredKeys: [] },
  );
}

const contentTypes = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'application/vnd.api+json',
  'text/plain',
  'text/json',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=xyz',
  'application/octet-stream',
  '',
  ';;;',
);

export function fuzzRequest(ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  const documented = fc.constantFrom(...ctx.operations).chain((op) =>
    fc.tuple(
      fc.oneof({ weight: 4, arbitrary: fc.constant(op.method) }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) }),
      pathOf(op.template, ctx.ids.length ? fc.oneof(fc.constantFrom(...ctx.ids), hostileSegment) : hostileSegment),
    ),
  );
  const anywhere = fc.tuple(
    fc.constantFrom(...METHODS),
    fc.oneof(
      fc.constantFrom('/', '/api', '/api/v1', '/api/v1/', '/api/v2/send', '/api/v1/send/', '/API/V1/SEND', '//api/v1/usage', '/api/v1/usage/../send', '/healthz', '/readyz', '/docs', '/api/v1/openapi.json', '/metrics', '/api/v1/whatsapp/sessions/', '/dashboard'),
      fc.array(hostileSegment, { minLength: 1, maxLength: 4 }).map((segs) => `/api/v1/${segs.join('/')}`),
    ),
  );
  const query = fc.oneof({ weight: 5, arbitrary: fc.constant('') }, fc.constantFrom('?', '?a=1', '?api_key=sk_test_x', '?x=%ZZ', `?${'q'.repeat(3000)}=1`));
  const auth = fc.oneof(
    { weight: 6, arbitrary: fc.constant(`Bearer ${ctx.keys.test}`) },
    { weight: 2, arbitrary: fc.constant(`Bearer ${ctx.keys.live}`) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        '',
        'Bearer',
        'Bearer ',
        `bearer ${ctx.keys.test}`,
        `Bearer  ${ctx.keys.test}`,
        `Bearer ${ctx.keys.test} `,
        'Bearer sk_test_00000000000000000000000000000000',
        'Bearer sk_live_',
        `Basic ${Buffer.from('a:b').toString('base64')}`,
        `Bearer ${'x'.repeat(5000)}`,
        `Bearer ${ctx.keys.test.slice(0, -1)}`,
      ),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 80 }).map((s) => s.replace(/[^\x20-\x7e]/g, '')) },
  );
  const body = fc.oneof(
    { weight: 5, arbitrary: sendBody(ctx).map((b) => Buffer.from(JSON.stringify(b))) },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v))) },
    { weight: 1, arbitrary: fc.constantFrom('{"event":"scan"}', '{"event":"expire"}', '{"event":"disconnect"}', '{"event":"nope"}').map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 200 }).map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)) },
    { weight: 1, arbitrary: fc.constantFrom('{"platform":"telegram","recipient":"1\\u0000","caption":"\\u0000"}', '{"url":"https://example.com/\\u0000","event":"scan\\u0000"}').map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: fc.constantFrom('{', '[]', 'null', '""', '1', '{"a":', '\uFEFF{}', '{"platform":"telegram"}\u0000').map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: fc.constantFrom(70 * 1024, 64 * 1024 + 1).map((n) => Buffer.from(JSON.stringify({ caption: 'x'.repeat(n) }))) },
    { weight: 1, arbitrary: fc.string({ maxLength: 50 }).map((s) => Buffer.from(JSON.stringify({ platform: 'telegram', recipient: s }), 'utf16le')) },
  );
  return fc
    .record({
      target: fc.oneof({ weight: 4, arbitrary: documented }, { weight: 1, arbitrary: anywhere }),
      query,
      auth,
      contentType: fc.option(contentTypes, { nil: undefined }),
      body: fc.option(body, { nil: undefined, freq: 4 }),
      idempotencyKey: fc.option(fc.oneof(fc.uuid(), fc.constantFrom('', ' ', 'k'.repeat(256), 'same-key-1', 'same-key-2')), { nil: undefined }),
      requestId: fc.option(fc.oneof(fc.uuid(), fc.string({ maxLength: 200 }).map((s) => s.replace(/[^\x20-\x7e]/g, ''))), { nil: undefined }),
      contentEncoding: fc.option(fc.constantFrom('gzip', 'br', 'identity', 'x-unknown'), { nil: undefined, freq: 8 }),
      accept: fc.option(fc.constantFrom('application/json', 'text/html', 'application/xml', '*/*'), { nil: undefined, freq: 4 }),
    })
    .map(({ target: [method, path], query: q, auth: a, contentType, body: b, idempotencyKey, requestId, contentEncoding, accept }) => {
      const headers: Record<string, string> = {};
      // A live session dials the real WhatsApp (out of reach here: 502 after a wait); the sandbox runs the same code before it.
      const dialsWhatsapp = method === 'POST' && /^\/api\/v1\/whatsapp\/sessions\/?$/.test(path);
      if (a !== '') headers.authorization = dialsWhatsapp && a === `Bearer ${ctx.keys.live}` ? `Bearer ${ctx.keys.test}` : a;
      if (contentType !== undefined && contentType !== '') headers['content-type'] = contentType;
      else if (b !== undefined && contentType === undefined) headers['content-type'] = 'application/json';
      if (idempotencyKey !== undefined && idempotencyKey.trim() !== '') headers['idempotency-key'] = idempotencyKey;
      if (requestId !== undefined && requestId !== '') headers['x-request-id'] = requestId;
      if (contentEncoding !== undefined) headers['content-encoding'] = contentEncoding;
      if (accept !== undefined) headers.accept = accept;
      const withBody = b !== undefined && method !== 'GET' && method !== 'HEAD';
      return { method, url: `${path}${q}`, headers, body: withBody ? b : undefined };
    });
}
