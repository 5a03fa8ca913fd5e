import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A strict stand-in for linkedin.com's Voyager API on loopback, as strict as the web app's own API is.
 *
 * It checks on every call what the real service needs (the li_at cookie, JSESSIONID in quotes, the
 * csrf-token header equal to it, the Rest.li protocol header) and what the web app sends with it
 * (`x-li-track` with its ten keys, `x-li-lang`, `x-li-page-instance`, a Referer under /messaging/, the
 * endpoint's own `accept`), the order of a delivery (me → profile lookup → upload slot → PUT upload →
 * createMessage, one flow at a time per account) and the shape of every body. Anything off is answered
 * with 400 and listed in `violations`, so a test that expects delivery fails and says why.
 *
 * Like LinkedIn it answers with cookies: every answer sets a new `lidc` (and, when told, a new value of
 * another cookie), and the following calls of the delivery must carry the new value. A csrf-token that
 * is not the JSESSIONID (the rotated one included) gets LinkedIn's 403 "CSRF check failed.". An account
 * bound to a user agent is signed out by a call from any other (a redirect that deletes li_at, then
 * 401s), as LinkedIn does (mautrix/linkedin #55, PR #61); an account flagged as automated gets 999.
 *
 * It also serves LinkedIn's realtime event stream as mautrix-linkedin reads it (pkg/linkedingo/
 * realtime.go, commit 525a6e3): `GET /realtime/connect?rc=1` with `accept: text/event-stream` and the
 * realtime headers (request.go:149-162) answers 200 and stays open, writing `data: <json>` lines: first a
 * ClientConnection, then a Heartbeat every 15 s (TextsHQ/platform-linkedin src/lib/real-time.ts:
 * "linkedin sends heartbeats every 15 seconds") and a DecoratedEvent for every message in one of the
 * account's conversations (messagesTopic, ours included) and every seen receipt (messageSeenReceiptsTopic).
 * The client's heartbeat (`POST /realtime/realtimeFrontendClientConnectivityTracking?action=sendHeartbeat`,
 * realtime.go:122-140) must name the realtime session of an open stream. The stream's calls are checked
 * like every call (session, CSRF, the web app's headers) but stand outside a delivery's flow and its
 * cookie rotation (the realtime front end is a service of its own).
 */

export type VoyagerStep = 'me' | 'profile' | 'uploadMetadata' | 'upload' | 'createMessage' | 'messages' | 'realtime' | 'heartbeat';

/** Calls outside a delivery's flow: the realtime stream and its heartbeats. */
const REALTIME_STEPS: ReadonlySet<VoyagerStep> = new Set(['realtime', 'heartbeat']);

/** The messenger GraphQL query a conversation's messages are read with (as mautrix-linkedin reads them). */
export const MESSAGES_QUERY_ID = 'messengerMessages.4088d03bc70c91c3fa68965cb42336de';

/** A message in a conversation, as the messages query returns it. */
export interface ConversationEntry {
  entityUrn: string;
  deliveredAt: number;
  senderUrn: string;
  text: string;
  renderContent: unknown[];
  /**
   * DEFAULT, EDITED, RECALLED (taken back: its text is gone) or SYSTEM (LinkedIn's own line in the
   * thread): mautrix-linkedin pkg/linkedingo/messages.go:147-153 (MessageBodyRenderFormat), acted on in
   * pkg/connector/handlelinkedin.go:148-163 (a recalled message removes one, a system message is ignored).
   */
  format: 'DEFAULT' | 'EDITED' | 'RECALLED' | 'SYSTEM';
}

/** How the fake answers a call without a valid session: 401, or a 302 to the login page. */
export type SignedOutAnswer = 'unauthorized' | 'login-redirect';

export interface VoyagerAccount {
  liAt: string;
  csrfToken: string;
  /** The account's own `urn:li:fsd_profile:…` (the mailbox). */
  profileUrn: string;
  /** The browser that holds the session: a call with another User-Agent ends the session. */
  userAgent?: string;
  /** The browser's other cookies: every call must carry them (or the values LinkedIn set since). */
  cookies?: Record<string, string>;
}

export interface VoyagerProfile {
  publicId: string;
  urn: string;
}

export interface VoyagerCall {
  /** performance.now() when the request arrived. */
  at: number;
  method: string;
  path: string;
  step: VoyagerStep | null;
  /** What the fake answered. */
  status: number;
  liAt: string | undefined;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body, when there was one. */
  body: unknown;
  /** The client's port as this server saw it: tells a proxy's connection (test/fixtures/proxies.ts) from a direct one. */
  remotePort?: number;
}

export interface VoyagerUpload {
  at: number;
  liAt: string;
  assetUrn: string;
  bytes: Buffer;
  headers: IncomingHttpHeaders;
}

export interface VoyagerMessage {
  at: number;
  liAt: string;
  body: any;
  entityUrn: string;
}

export interface InjectedFailure {
  status: number;
  /** How many calls of the step get it (default 1). */
  times?: number;
  headers?: Record<string, string>;
}

export interface LinkedinVoyagerFake {
  /** The value for LINKEDIN_API_ROOT. */
  readonly apiRoot: string;
  readonly calls: VoyagerCall[];
  readonly uploads: VoyagerUpload[];
  readonly messages: VoyagerMessage[];
  /** Protocol mistakes of the client, in words. */
  readonly violations: string[];
  addAccount(account: VoyagerAccount): void;
  addProfile(profile: VoyagerProfile): void;
  /** From now on every call with this li_at is signed out. */
  expire(liAt: string, answer: SignedOutAnswer): void;
  /** The next `times` calls of `step` get this status (after the session check passed). */
  failNext(step: VoyagerStep, failure: InjectedFailure): void;
  /** Headers the upload slot asks for, and that the PUT must carry back. */
  setUploadHeaders(headers: Record<string, string>): void;
  /** How an unknown public id is answered: an empty list (default) or 404. */
  setUnknownProfileAnswer(answer: 'empty' | 'not-found'): void;
  /** The next createMessage is accepted (the message exists) but its answer only leaves after `ms`: a lost answer. */
  stallNextAcceptedMessage(ms: number): void;
  /** The recipient writes into a conversation (a later messages query returns it); returns its entityUrn. */
  pushMessage(
    conversationUrn: string,
    message: {
      from: string;
      text?: string;
      content?: 'audio' | 'image' | 'file' | 'video';
      deliveredAt?: number;
      format?: ConversationEntry['format'];
      /** The entityUrn of the message it quotes (a reply to it, with the text beside it). */
      quotes?: string;
    },
  ): string;
  /** The conversation of this account with a profile it wrote to by profile (created by its first createMessage). */
  conversationWith(liAt: string, profileUrn: string): string | undefined;
  /** An existing conversation of the account with this li_at; returns its `urn:li:msg_conversation:(…)`. */
  addConversation(liAt: string, threadId: string): string;
  /** The next answer to `step` for this li_at sets a new value of cookie `name` (returned), which later calls of the delivery must carry. */
  rotateCookieOn(liAt: string, step: VoyagerStep, name: string): void;
  /** Someone in a conversation saw a message (pushed as a seen receipt on the account's open streams). */
  seeMessage(conversationUrn: string, messageUrn: string, seenBy: string, seenAt?: number): void;
  /** Ends the account's open realtime streams as a broken connection does (the socket goes away). */
  dropStreams(liAt: string): void;
  /** The account's realtime streams open now. */
  openStreams(liAt: string): number;
  /** Values the fake set with rotateCookieOn, in order. */
  readonly rotatedValues: Array<{ liAt: string; name: string; value: string }>;
  /** From now on every call with this li_at is refused as automated (999). */
  flagAutomated(liAt: string): void;
  /** li_at values signed out because a call came from another user agent than their browser's. */
  readonly endedByUserAgent: string[];
  /** Calls answered 403 "CSRF check failed.". */
  readonly csrfRefusals: VoyagerCall[];
  callsOf(step: VoyagerStep, liAt?: string): VoyagerCall[];
  close(): Promise<void>;
}

/** The `accept` the web app sends to each endpoint. */
const ACCEPT_OF: Record<Exclude<VoyagerStep, 'upload'>, string> = {
  me: 'application/vnd.linkedin.normalized+json+2.1',
  profile: 'application/vnd.linkedin.normalized+json+2.1',
  uploadMetadata: 'application/vnd.linkedin.normalized+json+2.1',
  createMessage: 'application/json',
  messages: 'application/graphql',
  // realtime.go:172 (contentTypeTextEventStream) and :124 (the heartbeat's `accept: */*`).
  realtime: 'text/event-stream',
  heartbeat: '*/*',
};
/** `x-li-track`'s keys and the type of each, as the web app sends them. */
const LI_TRACK_KEYS: Record<string, 'string' | 'number'> = {
  clientVersion: 'string',
  mpVersion: 'string',
  osName: 'string',
  timezoneOffset: 'number',
  timezone: 'string',
  deviceFormFactor: 'string',
  mpName: 'string',
  displayDensity: 'number',
  displayWidth: 'number',
  displayHeight: 'number',
};
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PROFILE_URN = /^urn:li:fsd_profile:([A-Za-z0-9_-]+)$/;

/** Where each step may come from, within one account's flow. */
const ALLOWED_AFTER: Record<VoyagerStep, Array<VoyagerStep | null>> = {
  me: [null, 'me', 'profile', 'uploadMetadata', 'upload', 'createMessage', 'messages'],
  profile: ['me'],
  uploadMetadata: ['me', 'profile'],
  upload: ['uploadMetadata'],
  createMessage: ['upload'],
  // A look at conversations opens the messaging page first (me), then reads each conversation.
  messages: ['me', 'messages'],
  realtime: [],
  heartbeat: [],
};

interface FlowState {
  last: VoyagerStep | null;
  /** Asset handed out by the last upload slot, and whether its bytes arrived. */
  asset?: { urn: string; token: string; fileSize: number; uploaded: boolean; used: boolean };
  signedOut?: SignedOutAnswer;
  /** Cookies set during this delivery (from its `me` on): later calls must carry these values. */
  issued: Map<string, string>;
  /** Cookies to rotate on the next answer to a step. */
  rotateOn: Array<{ step: VoyagerStep; name: string }>;
  automated?: boolean;
  /** The `x-li-realtime-session` ids of the streams this account opened: its heartbeats name one. */
  realtimeSessions: Set<string>;
}

function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) cookies.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  return cookies;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function stepOf(method: string, url: URL): VoyagerStep | null {
  const p = url.pathname;
  if (method === 'GET' && p === '/voyager/api/me') return 'me';
  if (method === 'GET' && p === '/voyager/api/identity/dash/profiles') return 'profile';
  if (method === 'POST' && p === '/voyager/api/voyagerVideoDashMediaUploadMetadata') return 'uploadMetadata';
  if (method === 'PUT' && p.startsWith('/dms-uploads/')) return 'upload';
  if (method === 'POST' && p === '/voyager/api/voyagerMessagingDashMessengerMessages') return 'createMessage';
  if (method === 'GET' && p === '/voyager/api/voyagerMessagingGraphQL/graphql') return 'messages';
  if (method === 'GET' && p === '/realtime/connect') return 'realtime';
  if (method === 'POST' && p === '/realtime/realtimeFrontendClientConnectivityTracking') return 'heartbeat';
  return null;
}

function sameShape(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export async function startLinkedinVoyagerFake(
  options: { accounts?: VoyagerAccount[]; profiles?: VoyagerProfile[]; signedOut?: SignedOutAnswer } = {},
): Promise<LinkedinVoyagerFake> {
  const accounts = new Map<string, VoyagerAccount>();
  const profiles = new Map<string, VoyagerProfile>();
  const flows = new Map<string, FlowState>();
  const failures = new Map<VoyagerStep, Array<Required<InjectedFailure>>>();
  const calls: VoyagerCall[] = [];
  const uploads: VoyagerUpload[] = [];
  const messages: VoyagerMessage[] = [];
  const violations: string[] = [];
  const signedOut: SignedOutAnswer = options.signedOut ?? 'unauthorized';
  let uploadHeaders: Record<string, string> = {};
  let unknownProfile: 'empty' | 'not-found' = 'empty';
  const conversations = new Map<string, string>();
  const entries = new Map<string, ConversationEntry[]>();
  const profileConversations = new Map<string, string>();
  const rotatedValues: Array<{ liAt: string; name: string; value: string }> = [];
  const endedByUserAgent: string[] = [];
  const csrfRefusals: VoyagerCall[] = [];
  let stallMs = 0;
  let origin = '';
  /** Open realtime streams, by li_at: the response and the realtime session id it was opened with. */
  const streams = new Map<string, Set<{ res: ServerResponse; sessionId: string; heartbeat: NodeJS.Timeout }>>();

  /** Writes one event to the account's open streams, as `data: <json>` and a blank line. */
  function publish(liAt: string, event: unknown): void {
    for (const stream of streams.get(liAt) ?? []) stream.res.write(`data: ${JSON.stringify(event)}\n\n`);
  }

  /**
   * A DecoratedEvent of one topic (realtime.go:68-87). Topics are `urn:li-realtime:<topic>:<topic-dependent>`
   * (handlelinkedin.go:66); the part after the topic is not read by the client, so any urn does.
   */
  function decorated(topic: string, data: Record<string, unknown>): unknown {
    return {
      'com.linkedin.realtimefrontend.DecoratedEvent': {
        topic: `urn:li-realtime:${topic}:urn:li-realtime:myself`,
        leftServerAt: Date.now(),
        id: randomBytes(8).toString('hex'),
        payload: { data },
      },
    };
  }

  /** A message as LinkedIn pushes it on messagesTopic (messages.go:112-141: DecoratedMessage's result, with its conversation). */
  function publishMessage(conversationUrn: string, e: ConversationEntry): void {
    const liAt = conversations.get(conversationUrn);
    if (liAt === undefined) return;
    publish(
      liAt,
      decorated('messagesTopic', {
        doDecorateMessageMessengerRealtimeDecoration: {
          result: { ...messageElement(conversationUrn, e), conversation: { entityUrn: conversationUrn } },
        },
      }),
    );
  }

  for (const a of options.accounts ?? []) accounts.set(a.liAt, a);
  for (const p of options.profiles ?? []) profiles.set(p.publicId.toLowerCase(), p);

  const flow = (liAt: string): FlowState => {
    let state = flows.get(liAt);
    if (!state) flows.set(liAt, (state = { last: null, issued: new Map(), rotateOn: [], realtimeSessions: new Set() }));
    return state;
  };

  /** Set-Cookie headers of an answer: a new lidc always (LinkedIn's load-balancer cookie), and any rotation asked for. */
  function cookiesToSet(state: FlowState, liAt: string, step: VoyagerStep | null): string[] {
    const lidc = `"b=VB${randomBytes(2).toString('hex')}:s=V:r=V:a=V:p=V:g=${randomBytes(2).readUInt16BE(0)}:u=1:x=1:i=${Math.floor(Date.now() / 1000)}:t=${Math.floor(Date.now() / 1000) + 86_400}:v=2:sig=AQ${randomBytes(12).toString('base64url')}"`;
    state.issued.set('lidc', lidc);
    const headers = [`lidc=${lidc}; Path=/; HttpOnly; SameSite=None`];
    const due = state.rotateOn.filter((r) => r.step === step);
    state.rotateOn = state.rotateOn.filter((r) => r.step !== step);
    for (const { name } of due) {
      const value = name === 'JSESSIONID' ? `"ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}"` : `v=2&${randomBytes(10).toString('hex')}`;
      state.issued.set(name, value);
      rotatedValues.push({ liAt, name, value });
      headers.push(`${name}=${value}; Path=/; SameSite=None`);
    }
    return headers;
  }

  function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): number {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers }).end(text);
    return status;
  }

  function signedOutAnswer(res: ServerResponse, how: SignedOutAnswer, path: string, deleteLiAt = false): number {
    if (how === 'login-redirect') {
      res
        .writeHead(302, {
          location: `${origin}/login?session_redirect=${encodeURIComponent(path)}`,
          'content-length': 0,
          ...(deleteLiAt ? { 'set-cookie': ['li_at="delete me"; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly'] } : {}),
        })
        .end();
      return 302;
    }
    return json(res, 401, { status: 401, serviceErrorCode: 0, code: 'UNAUTHORIZED' });
  }

  function violation(res: ServerResponse, what: string): number {
    violations.push(what);
    return json(res, 400, { status: 400, message: `fake Voyager: ${what}` });
  }

  /** The session checks of every call; returns the account, or answers and returns undefined. */
  function authenticate(req: IncomingMessage, res: ServerResponse, path: string, call: VoyagerCall, step: VoyagerStep): VoyagerAccount | undefined {
    const cookies = parseCookies(req.headers.cookie);
    const liAt = cookies.get('li_at');
    call.liAt = liAt;
    const account = liAt === undefined ? undefined : accounts.get(liAt);
    if (!account) {
      violations.push(`signed out: ${liAt === undefined ? 'no li_at cookie' : 'unknown li_at cookie'}`);
      call.status = signedOutAnswer(res, signedOut, path);
      return undefined;
    }
    const state = flow(account.liAt);
    if (state.automated) {
      // LinkedIn's answer to what it takes for a bot: status 999 and a small HTML page.
      const page = '<html><head><title>Request denied</title></head><body>Request denied</body></html>';
      res.writeHead(999, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(page) }).end(page);
      call.status = 999;
      return undefined;
    }
    if (state.signedOut) {
      call.status = signedOutAnswer(res, state.signedOut, path);
      return undefined;
    }
    const userAgent = String(req.headers['user-agent'] ?? '');
    if (account.userAgent !== undefined && userAgent !== account.userAgent) {
      // The cookie was used from another browser than its own: LinkedIn ends the session at once.
      endedByUserAgent.push(account.liAt);
      state.signedOut = 'unauthorized';
      call.status = signedOutAnswer(res, 'login-redirect', path, true);
      return undefined;
    }
    if (!/^Mozilla\/5\.0 \(/.test(userAgent)) {
      violations.push('signed out: user agent is not a browser');
      call.status = signedOutAnswer(res, signedOut, path);
      return undefined;
    }
    // A new delivery begins with the browser's cookies; within one, the values set since must come back.
    if (step === 'me') state.issued.clear();
    const jsession = cookies.get('JSESSIONID');
    const validJsession = new Set([`"${account.csrfToken}"`, ...(state.issued.has('JSESSIONID') ? [state.issued.get('JSESSIONID')!] : [])]);
    const csrfOk =
      jsession !== undefined &&
      /^".*"$/.test(jsession) &&
      req.headers['csrf-token'] === jsession.slice(1, -1) &&
      (state.issued.has('JSESSIONID') ? jsession === state.issued.get('JSESSIONID') : validJsession.has(jsession));
    if (!csrfOk) {
      csrfRefusals.push(call);
      const text = 'CSRF check failed.';
      res.writeHead(403, { 'content-type': 'text/plain;charset=UTF-8', 'content-length': Buffer.byteLength(text) }).end(text);
      call.status = 403;
      return undefined;
    }
    for (const [name, value] of REALTIME_STEPS.has(step) ? [] : state.issued) {
      if (name !== 'JSESSIONID' && cookies.get(name) !== value) {
        violations.push(`${step}: cookie ${name} is not the value LinkedIn set on an earlier answer of this delivery`);
        call.status = json(res, 400, { status: 400, message: `fake Voyager: stale cookie ${name}` });
        return undefined;
      }
    }
    for (const name of Object.keys(account.cookies ?? {})) {
      if (!cookies.has(name)) {
        violations.push(`${step}: the browser's cookie ${name} is missing`);
        call.status = json(res, 400, { status: 400, message: `fake Voyager: missing cookie ${name}` });
        return undefined;
      }
    }
    if (req.headers['x-restli-protocol-version'] !== '2.0.0') {
      call.status = violation(res, `${step}: x-restli-protocol-version is not 2.0.0`);
      return undefined;
    }
    if (step !== 'upload') {
      const problem = webAppHeaderProblem(req, step);
      if (problem) {
        call.status = violation(res, `${step}: ${problem}`);
        return undefined;
      }
    }
    return account;
  }

  /** What the web app sends on every Voyager call beside the session: refused when missing or malformed. */
  function webAppHeaderProblem(req: IncomingMessage, step: Exclude<VoyagerStep, 'upload'>): string | null {
    const h = req.headers;
    if (h.accept !== ACCEPT_OF[step]) return `accept ${h.accept}, the web app sends ${ACCEPT_OF[step]}`;
    const track = h['x-li-track'];
    if (typeof track !== 'string') return 'no x-li-track';
    let parsed: unknown;
    try {
      parsed = JSON.parse(track);
    } catch {
      return 'x-li-track is not JSON';
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return 'x-li-track is not a JSON object';
    const keys = Object.keys(parsed).sort().join(',');
    if (keys !== Object.keys(LI_TRACK_KEYS).sort().join(',')) return `x-li-track keys ${keys}`;
    for (const [key, type] of Object.entries(LI_TRACK_KEYS)) {
      if (typeof (parsed as Record<string, unknown>)[key] !== type) return `x-li-track ${key} is not a ${type}`;
    }
    const t = parsed as Record<string, unknown>;
    if (t.osName !== 'web' || t.mpName !== 'voyager-web' || t.deviceFormFactor !== 'DESKTOP') return 'x-li-track is not the desktop web app';
    if (typeof h['x-li-lang'] !== 'string' || !/^[a-z]{2}_[A-Z]{2}$/.test(h['x-li-lang'])) return `x-li-lang ${h['x-li-lang']}`;
    if (typeof h['x-li-page-instance'] !== 'string' || !/^urn:li:page:[a-z0-9_]+;[A-Za-z0-9+/=]{16,}$/.test(h['x-li-page-instance'])) {
      return `x-li-page-instance ${h['x-li-page-instance']}`;
    }
    if (typeof h.referer !== 'string' || !h.referer.startsWith(`${origin}/messaging/`)) return `referer ${h.referer} is not a messaging page`;
    // A Chromium browser sends its client hints, agreeing with its User-Agent; Firefox and Safari send none.
    const ua = String(h['user-agent'] ?? '');
    const chromium = /Chrome\/(\d+)\./.exec(ua);
    if (chromium && !/Firefox\//.test(ua)) {
      if (!String(h['sec-ch-ua'] ?? '').includes(`"Chromium";v="${chromium[1]}"`)) return `sec-ch-ua ${h['sec-ch-ua']} does not match the user agent`;
      if (!/^\?[01]$/.test(String(h['sec-ch-ua-mobile'] ?? ''))) return `sec-ch-ua-mobile ${h['sec-ch-ua-mobile']}`;
      if (!/^"[A-Za-z ]+"$/.test(String(h['sec-ch-ua-platform'] ?? ''))) return `sec-ch-ua-platform ${h['sec-ch-ua-platform']}`;
    } else if (h['sec-ch-ua'] !== undefined) {
      return 'client hints from a browser that sends none';
    }
    if (h.authorization !== undefined) return 'an authorization header has no place here';
    return null;
  }

  function injected(step: VoyagerStep, res: ServerResponse): number | undefined {
    const queue = failures.get(step);
    const next = queue?.[0];
    if (!queue || !next) return undefined;
    next.times -= 1;
    if (next.times <= 0) queue.shift();
    return json(res, next.status, { status: next.status, message: 'injected by the test' }, next.headers);
  }

  async function handle(req: IncomingMessage, res: ServerResponse, call: VoyagerCall): Promise<number> {
    const url = new URL(req.url ?? '/', origin);
    const step = stepOf(call.method, url);
    call.step = step;
    const raw = await readBody(req);
    if (step === null) {
      if (url.pathname === '/login') violations.push('followed a redirect to the login page');
      else violations.push(`unknown endpoint ${call.method} ${url.pathname}`);
      res.writeHead(404, { 'content-type': 'text/html' }).end('<html>not here</html>');
      return 404;
    }
    if (step !== 'upload' && raw.length > 0) {
      try {
        call.body = JSON.parse(raw.toString('utf8'));
      } catch {
        return violation(res, `${step}: body is not JSON`);
      }
    }
    const account = authenticate(req, res, url.pathname + url.search, call, step);
    if (!account) return call.status;

    const state = flow(account.liAt);
    // Every answer of the Voyager flow from here on carries LinkedIn's cookies.
    if (!REALTIME_STEPS.has(step)) {
      res.setHeader('set-cookie', cookiesToSet(state, account.liAt, step));
      if (!ALLOWED_AFTER[step].includes(state.last)) return violation(res, `${step} after ${state.last ?? 'nothing'}`);
    }
    const failed = injected(step, res);
    if (failed !== undefined) return failed;

    switch (step) {
      case 'realtime': {
        const problem = realtimeProblem(req, url);
        if (problem) return violation(res, `realtime: ${problem}`);
        const sessionId = String(req.headers['x-li-realtime-session']);
        state.realtimeSessions.add(sessionId);
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        const heartbeat = setInterval(() => res.write(`data: ${JSON.stringify({ 'com.linkedin.realtimefrontend.Heartbeat': {} })}\n\n`), 15_000);
        heartbeat.unref();
        const stream = { res, sessionId, heartbeat };
        let open = streams.get(account.liAt);
        if (!open) streams.set(account.liAt, (open = new Set()));
        open.add(stream);
        res.on('close', () => {
          clearInterval(heartbeat);
          open.delete(stream);
        });
        // realtime.go:264-267: the first event, before any other.
        res.write(`data: ${JSON.stringify({ 'com.linkedin.realtimefrontend.ClientConnection': { id: randomUUID() } })}\n\n`);
        return 200;
      }
      case 'heartbeat': {
        if (url.searchParams.get('action') !== 'sendHeartbeat') return violation(res, 'heartbeat: action is not sendHeartbeat');
        if (req.headers['content-type'] !== 'text/plain;charset=UTF-8') return violation(res, `heartbeat: content-type ${req.headers['content-type']}`);
        if (req.headers.origin !== origin) return violation(res, `heartbeat: origin ${req.headers.origin}`);
        const body = call.body as Record<string, unknown> | undefined;
        const keys = Object.keys(body ?? {}).sort().join(',');
        if (keys !== 'actorUrn,clientId,contextUrns,isFirstHeartbeat,isLastHeartbeat,mpName,mpVersion,realtimeSessionId') return violation(res, `heartbeat: body keys ${keys}`);
        if (!state.realtimeSessions.has(String(body!.realtimeSessionId))) return violation(res, 'heartbeat: realtimeSessionId is not a stream this account opened');
        if (body!.actorUrn !== account.profileUrn || !sameShape(body!.contextUrns, [account.profileUrn])) return violation(res, 'heartbeat: actorUrn and contextUrns are not the session owner');
        if (body!.mpName !== 'voyager-web' || body!.clientId !== 'voyager-web' || typeof body!.mpVersion !== 'string') return violation(res, 'heartbeat: not the web app (mpName, clientId, mpVersion)');
        if (typeof body!.isFirstHeartbeat !== 'boolean' || body!.isLastHeartbeat !== false) return violation(res, 'heartbeat: isFirstHeartbeat, isLastHeartbeat');
        res.writeHead(200, { 'content-length': 0 }).end();
        return 200;
      }
      case 'me': {
        state.last = 'me';
        const id = PROFILE_URN.exec(account.profileUrn)?.[1] ?? 'unknown';
        return json(res, 200, {
          data: { plainId: 114_477_123, '*miniProfile': `urn:li:fs_miniProfile:${id}`, premiumSubscriber: false, $type: 'com.linkedin.voyager.common.Me' },
          included: [
            {
              entityUrn: `urn:li:fs_miniProfile:${id}`,
              dashEntityUrn: account.profileUrn,
              publicIdentifier: 'the-sender',
              firstName: 'Sender',
              lastName: 'Account',
              $type: 'com.linkedin.voyager.identity.shared.MiniProfile',
            },
          ],
        });
      }
      case 'profile': {
        if (url.searchParams.get('q') !== 'memberIdentity') return violation(res, 'profile: q is not memberIdentity');
        const identity = url.searchParams.get('memberIdentity');
        if (!identity) return violation(res, 'profile: no memberIdentity');
        state.last = 'profile';
        const found = profiles.get(identity.toLowerCase());
        if (!found) {
          if (unknownProfile === 'not-found') return json(res, 404, { status: 404, message: 'Not Found' });
          return json(res, 200, { elements: [], paging: { count: 10, start: 0, total: 0 } });
        }
        return json(res, 200, {
          elements: [{ entityUrn: found.urn, publicIdentifier: found.publicId, $type: 'com.linkedin.voyager.dash.identity.profile.Profile' }],
          paging: { count: 10, start: 0, total: 1 },
        });
      }
      case 'uploadMetadata': {
        if (url.searchParams.get('action') !== 'upload') return violation(res, 'uploadMetadata: action is not upload');
        const body = call.body as Record<string, unknown> | undefined;
        const keys = Object.keys(body ?? {}).sort();
        if (!sameShape(keys, ['fileSize', 'filename', 'mediaUploadType'])) return violation(res, `uploadMetadata: body keys ${keys.join(',')}`);
        if (body!.mediaUploadType !== 'VOICE_MESSAGE') return violation(res, 'uploadMetadata: mediaUploadType is not VOICE_MESSAGE');
        if (body!.filename !== 'voice.m4a') return violation(res, 'uploadMetadata: filename is not voice.m4a');
        const fileSize = body!.fileSize;
        if (typeof fileSize !== 'number' || !Number.isInteger(fileSize) || fileSize <= 0) return violation(res, 'uploadMetadata: fileSize is not a positive integer');
        const token = randomBytes(12).toString('hex');
        const urn = `urn:li:digitalmediaAsset:D4E${randomBytes(8).toString('hex')}`;
        state.asset = { urn, token, fileSize, uploaded: false, used: false };
        state.last = 'uploadMetadata';
        return json(res, 200, {
          data: {
            value: {
              urn,
              singleUploadUrl: `${origin}/dms-uploads/${token}/voice-message?ca=vector_messaging&cn=uploads`,
              singleUploadHeaders: uploadHeaders,
              type: 'SINGLE',
              $type: 'com.linkedin.voyager.videocontent.MediaUploadMetadata',
            },
            $type: 'com.linkedin.restli.common.ActionResponse',
          },
          included: [],
        });
      }
      case 'upload': {
        const asset = state.asset;
        if (!asset || url.pathname !== `/dms-uploads/${asset.token}/voice-message`) return violation(res, 'upload: not the slot just handed out');
        if (url.searchParams.get('ca') !== 'vector_messaging') return violation(res, 'upload: query string of the slot URL was dropped');
        for (const [name, value] of Object.entries(uploadHeaders)) {
          if (req.headers[name.toLowerCase()] !== value) return violation(res, `upload: header ${name} of the slot missing or changed`);
        }
        if (raw.length !== asset.fileSize) return violation(res, `upload: ${raw.length} bytes, slot asked for ${asset.fileSize}`);
        asset.uploaded = true;
        state.last = 'upload';
        uploads.push({ at: call.at, liAt: account.liAt, assetUrn: asset.urn, bytes: raw, headers: req.headers });
        res.writeHead(201, { 'content-length': 0 }).end();
        return 201;
      }
      case 'createMessage': {
        if (url.searchParams.get('action') !== 'createMessage') return violation(res, 'createMessage: action is not createMessage');
        // The web client sends the JSON body as text/plain (no CORS preflight); so must we.
        if (req.headers['content-type'] !== 'text/plain;charset=UTF-8') return violation(res, `createMessage: content-type ${req.headers['content-type']}`);
        const problem = checkCreateMessage(call.body, account, state, profiles, conversations);
        if (problem) return violation(res, `createMessage: ${problem}`);
        state.asset!.used = true;
        state.last = 'createMessage';
        const entityUrn = `urn:li:msg_message:(${account.profileUrn},2-${randomBytes(12).toString('base64url')})`;
        const body = call.body as any;
        let conversationUrn: string | undefined = body.message.conversationUrn;
        if (conversationUrn === undefined) {
          const key = `${account.liAt} ${body.hostRecipientUrns[0]}`;
          conversationUrn = profileConversations.get(key) ?? `urn:li:msg_conversation:(${account.profileUrn},2-${randomBytes(9).toString('base64url')})`;
          profileConversations.set(key, conversationUrn);
          conversations.set(conversationUrn, account.liAt);
        }
        const sentAt = Date.now();
        const list = entries.get(conversationUrn) ?? [];
        list.push({ entityUrn, deliveredAt: sentAt, senderUrn: `urn:li:msg_messagingParticipant:${account.profileUrn}`, text: '', renderContent: body.message.renderContentUnions, format: 'DEFAULT' });
        entries.set(conversationUrn, list);
        const message = { at: call.at, liAt: account.liAt, body: call.body, entityUrn };
        messages.push(message);
        publishMessage(conversationUrn, list.at(-1)!);
        if (stallMs > 0) {
          const ms = stallMs;
          stallMs = 0;
          await new Promise((resolve) => setTimeout(resolve, ms));
          if (res.destroyed || res.writableEnded) return 0;
        }
        return json(res, 200, { value: { entityUrn, deliveredAt: sentAt, conversationUrn, $type: 'com.linkedin.messenger.Message' } });
      }
      case 'messages': {
        // queryId=…&variables=(deliveredAt:<ms>,conversationUrn:<urn, percent-encoded>,countBefore:<n>,countAfter:0)
        const raw = url.search;
        if (new URLSearchParams(raw).get('queryId') !== MESSAGES_QUERY_ID) return violation(res, `messages: queryId is not ${MESSAGES_QUERY_ID}`);
        const vars = /[?&]variables=\(deliveredAt:(\d+),conversationUrn:([^,()&]+),countBefore:(\d+),countAfter:0\)(?:&|$)/.exec(raw);
        if (!vars) return violation(res, `messages: variables are not (deliveredAt,conversationUrn,countBefore,countAfter:0): ${raw}`);
        const urn = decodeURIComponent(vars[2]!);
        if (conversations.get(urn) !== account.liAt) return violation(res, `messages: conversation ${urn} is not one of this account's`);
        state.last = 'messages';
        const before = Number(vars[1]);
        const found = (entries.get(urn) ?? []).filter((e) => e.deliveredAt < before).slice(-Number(vars[3]));
        return json(res, 200, {
          data: {
            messengerMessagesByAnchorTimestamp: {
              elements: found.map((e) => messageElement(urn, e)),
              metadata: {},
              $type: 'com.linkedin.messenger.CollectionResponse',
            },
          },
        });
      }
    }
  }

  const server = createServer((req, res) => {
    const call: VoyagerCall = {
      at: performance.now(),
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      step: null,
      status: 0,
      liAt: undefined,
      headers: req.headers,
      body: undefined,
      ...(req.socket.remotePort !== undefined ? { remotePort: req.socket.remotePort } : {}),
    };
    calls.push(call);
    handle(req, res, call)
      .then((status) => {
        call.status = status;
      })
      .catch((err: unknown) => {
        violations.push(`fake crashed: ${String(err)}`);
        if (!res.headersSent) res.writeHead(500).end();
        call.status = 500;
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    apiRoot: origin,
    calls,
    uploads,
    messages,
    violations,
    addAccount: (a) => void accounts.set(a.liAt, a),
    addProfile: (p) => void profiles.set(p.publicId.toLowerCase(), p),
    expire(liAt, answer) {
      flow(liAt).signedOut = answer;
    },
    failNext(step, failure) {
      const queue = failures.get(step) ?? [];
      queue.push({ status: failure.status, times: failure.times ?? 1, headers: failure.headers ?? {} });
      failures.set(step, queue);
    },
    setUploadHeaders(headers) {
      uploadHeaders = { ...headers };
    },
    setUnknownProfileAnswer(answer) {
      unknownProfile = answer;
    },
    stallNextAcceptedMessage(ms) {
      stallMs = ms;
    },
    pushMessage(conversationUrn, message) {
      if (!conversations.has(conversationUrn)) throw new Error('pushMessage: unknown conversation');
      const entityUrn = `urn:li:msg_message:(${conversationUrn.slice('urn:li:msg_conversation:('.length).split(',')[0]},2-${randomBytes(12).toString('base64url')})`;
      const content: unknown[] = message.content === undefined ? [] : [{ [message.content === 'image' ? 'vectorImage' : message.content]: { url: 'https://media.example/x' } }];
      const list = entries.get(conversationUrn) ?? [];
      // A quoted reply carries the quoted message as a render content of its own, beside its text:
      // mautrix-linkedin pkg/linkedingo/messages.go:162 and :180-181 (RenderContent.RepliedMessageContent,
      // RepliedMessage.OriginalMessage), read in pkg/connector/tomatrix.go:97-100.
      const quoted = message.quotes === undefined ? undefined : list.find((e) => e.entityUrn === message.quotes);
      if (quoted) {
        content.unshift({
          repliedMessageContent: {
            originalMessage: { entityUrn: quoted.entityUrn, deliveredAt: quoted.deliveredAt, sender: { entityUrn: quoted.senderUrn }, body: { text: quoted.text, attributes: [] } },
          },
        });
      }
      const format = message.format ?? 'DEFAULT';
      // A recalled message is still listed, without its text or content (mautrix-linkedin handlelinkedin.go:153-158 removes it).
      const recalled = format === 'RECALLED';
      list.push({
        entityUrn,
        deliveredAt: message.deliveredAt ?? Date.now(),
        senderUrn: `urn:li:msg_messagingParticipant:${message.from}`,
        text: recalled ? '' : (message.text ?? ''),
        renderContent: recalled ? [] : content,
        format,
      });
      entries.set(conversationUrn, list);
      publishMessage(conversationUrn, list.at(-1)!);
      return entityUrn;
    },
    seeMessage(conversationUrn, messageUrn, seenBy, seenAt = Date.now()) {
      const liAt = conversations.get(conversationUrn);
      if (liAt === undefined) throw new Error('seeMessage: unknown conversation');
      // receipts.go:32-41: DecoratedSeenReceipt's result is a SeenReceipt (seenAt, message, seenByParticipant).
      publish(
        liAt,
        decorated('messageSeenReceiptsTopic', {
          doDecorateSeenReceiptMessengerRealtimeDecoration: {
            result: { seenAt, message: { entityUrn: messageUrn }, seenByParticipant: { entityUrn: `urn:li:msg_messagingParticipant:${seenBy}`, participantType: { member: {} } } },
          },
        }),
      );
    },
    dropStreams(liAt) {
      for (const stream of streams.get(liAt) ?? []) stream.res.destroy();
    },
    openStreams: (liAt) => streams.get(liAt)?.size ?? 0,
    conversationWith: (liAt, profileUrn) => profileConversations.get(`${liAt} ${profileUrn}`),
    addConversation(liAt, threadId) {
      const account = accounts.get(liAt);
      if (!account) throw new Error('addConversation: unknown li_at');
      const urn = `urn:li:msg_conversation:(${account.profileUrn},${threadId})`;
      conversations.set(urn, liAt);
      return urn;
    },
    rotateCookieOn(liAt, step, name) {
      flow(liAt).rotateOn.push({ step, name });
    },
    rotatedValues,
    flagAutomated(liAt) {
      flow(liAt).automated = true;
    },
    endedByUserAgent,
    csrfRefusals,
    callsOf: (step, liAt) => calls.filter((c) => c.step === step && (liAt === undefined || c.liAt === liAt)),
    async close() {
      for (const open of streams.values()) for (const stream of open) clearInterval(stream.heartbeat);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A message as the messages query lists it and the realtime stream pushes it (messages.go:129-141, com.linkedin.messenger.Message). */
function messageElement(conversationUrn: string, e: ConversationEntry): Record<string, unknown> {
  return {
    entityUrn: e.entityUrn,
    deliveredAt: e.deliveredAt,
    conversationUrn,
    sender: { entityUrn: e.senderUrn, participantType: { member: {} } },
    body: { text: e.text, attributes: [] },
    renderContent: e.renderContent,
    messageBodyRenderFormat: e.format,
    $type: 'com.linkedin.messenger.Message',
  };
}

/** What the stream's request must carry (realtime.go:168-172, request.go:149-162); null when all is there. */
function realtimeProblem(req: IncomingMessage, url: URL): string | null {
  const h = req.headers;
  if (url.searchParams.get('rc') !== '1') return 'rc is not 1';
  if (typeof h['x-li-realtime-session'] !== 'string' || !UUID.test(h['x-li-realtime-session'])) return `x-li-realtime-session ${h['x-li-realtime-session']} is not a uuid`;
  const normalized = 'application/vnd.linkedin.normalized+json+2.1';
  if (h['x-li-accept'] !== normalized || h['x-li-recipe-accept'] !== normalized) return 'x-li-accept or x-li-recipe-accept is not normalized JSON';
  if (h['x-li-query-accept'] !== 'application/graphql') return `x-li-query-accept ${h['x-li-query-accept']}`;
  if (h.priority !== 'u=1, i' || h['sec-fetch-mode'] !== 'cors' || h['sec-fetch-site'] !== 'same-origin' || h['sec-fetch-dest'] !== 'empty') return 'priority or sec-fetch-* are not the web app\'s';
  let queryMap: any;
  let recipeMap: unknown;
  try {
    queryMap = JSON.parse(String(h['x-li-query-map']));
    recipeMap = JSON.parse(String(h['x-li-recipe-map']));
  } catch {
    return 'x-li-query-map or x-li-recipe-map is not JSON';
  }
  for (const topic of ['messagesTopic', 'messageSeenReceiptsTopic']) {
    const queryId = queryMap?.topicToGraphQLQueryParams?.[topic]?.queryId;
    if (typeof queryId !== 'string' || !queryId.startsWith('voyagerMessagingDashMessengerRealtimeDecoration.')) return `x-li-query-map has no query for ${topic}`;
  }
  if (typeof recipeMap !== 'object' || recipeMap === null || Array.isArray(recipeMap)) return 'x-li-recipe-map is not an object';
  return null;
}

function checkCreateMessage(
  body: any,
  account: VoyagerAccount,
  state: FlowState,
  profiles: Map<string, VoyagerProfile>,
  conversations: Map<string, string>,
): string | null {
  if (typeof body !== 'object' || body === null) return 'no JSON body';
  const message = body.message;
  // Into an existing conversation (as mautrix-linkedin sends): conversationUrn, and no hostRecipientUrns.
  const intoConversation = typeof message?.conversationUrn === 'string';
  const keys = Object.keys(body).sort().join(',');
  const expectedKeys = intoConversation
    ? 'dedupeByClientGeneratedToken,mailboxUrn,message,trackingId'
    : 'dedupeByClientGeneratedToken,hostRecipientUrns,mailboxUrn,message,trackingId';
  if (keys !== expectedKeys) return `body keys ${keys}`;
  const messageKeys = intoConversation ? 'body,conversationUrn,originToken,renderContentUnions' : 'body,originToken,renderContentUnions';
  if (Object.keys(message ?? {}).sort().join(',') !== messageKeys) return `message keys ${Object.keys(message ?? {}).sort().join(',')}`;
  if (!sameShape(message.body, { attributes: [], text: '' })) return 'message.body is not an empty text';
  if (typeof message.originToken !== 'string' || !UUID.test(message.originToken)) return 'originToken is not a uuid';
  const unions = message.renderContentUnions;
  if (!Array.isArray(unions) || unions.length !== 1) return 'renderContentUnions is not one entry';
  const audio = unions[0]?.audio;
  if (!audio || Object.keys(unions[0]).length !== 1 || Object.keys(audio).sort().join(',') !== 'assetUrn,byteSize,duration') {
    return 'renderContentUnions[0] is not {audio: {assetUrn, byteSize, duration}}';
  }
  const asset = state.asset;
  if (!asset || audio.assetUrn !== asset.urn) return 'audio.assetUrn is not the asset just uploaded';
  if (audio.byteSize !== asset.fileSize) return `audio.byteSize ${audio.byteSize} is not the ${asset.fileSize} bytes uploaded`;
  if (!asset.uploaded) return 'the asset has no bytes';
  if (asset.used) return 'the asset was already sent';
  if (!Number.isInteger(audio.duration) || audio.duration <= 0 || audio.duration > 60_000) return 'audio.duration is not 1..60000 ms';
  if (body.mailboxUrn !== account.profileUrn) return 'mailboxUrn is not the session owner';
  if (intoConversation) {
    if (conversations.get(message.conversationUrn) !== account.liAt) return `conversation ${String(message.conversationUrn)} is not one of this account's`;
  } else {
    const recipients = body.hostRecipientUrns;
    if (!Array.isArray(recipients) || recipients.length !== 1) return 'hostRecipientUrns is not one urn';
    if (![...profiles.values()].some((p) => p.urn === recipients[0])) return `recipient ${String(recipients[0])} is not a known profile`;
  }
  if (typeof body.trackingId !== 'string' || body.trackingId.length !== 16 || /[^\u0000-\u00ff]/.test(body.trackingId)) return 'trackingId is not 16 bytes as a string';
  // What every public client and capture of the web app sends.
  if (body.dedupeByClientGeneratedToken !== false) return 'dedupeByClientGeneratedToken is not false';
  return null;
}
