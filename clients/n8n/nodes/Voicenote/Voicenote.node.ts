import type {
  IDataObject,
  IExecuteFunctions,
  ILoadOptionsFunctions,
  INodeExecutionData,
  INodePropertyOptions,
  INodeType,
  INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';
import { asNodeError, voicenoteList, voicenoteRequest } from '../../shared/transport';
import { ENTER_SESSION, voicenoteProperties } from './descriptions';

/** The `session` object of POST /send and POST /recipients/check, from the chosen sender or the fields entered. */
function sessionOf(ctx: IExecuteFunctions, i: number, platform: string, withProxy = false): IDataObject {
  const sender = ctx.getNodeParameter('sender', i) as string;
  if (sender !== ENTER_SESSION) return { session_id: sender };
  const text = (name: string) => String(ctx.getNodeParameter(name, i, '') ?? '').trim();
  // Send's only: a recipient check goes through the proxy the sender already has.
  const proxy = () => (withProxy ? text('proxy') : '');
  const entered: IDataObject =
    platform === 'linkedin'
      ? { li_at: text('liAt'), csrf_token: text('csrfToken'), user_agent: text('userAgent'), cookies: text('cookies'), proxy: proxy() }
      : platform === 'telegram'
        ? { bot_token: text('botToken'), session_id: text('sessionId'), proxy: proxy() }
        : { session_id: text('sessionId') };
  // Only what was entered: the service names the field that is missing or wrong.
  return Object.fromEntries(Object.entries(entered).filter(([, value]) => value !== ''));
}

function sendBody(ctx: IExecuteFunctions, i: number): IDataObject {
  const platform = ctx.getNodeParameter('platform', i) as string;
  const extra = ctx.getNodeParameter('additionalFields', i, {}) as IDataObject;
  const body: IDataObject = {
    platform,
    recipient: String(ctx.getNodeParameter('recipient', i)).trim(),
    audio_url: String(ctx.getNodeParameter('audioUrl', i)).trim(),
    session: sessionOf(ctx, i, platform, true),
  };
  if (extra.duration !== undefined) body.duration = extra.duration;
  if (extra.caption !== undefined && extra.caption !== '') body.caption = extra.caption;
  if (extra.sendAt !== undefined && extra.sendAt !== '') body.send_at = new Date(String(extra.sendAt)).toISOString();
  if (extra.recordingIndicator !== undefined) body.recording_indicator = extra.recordingIndicator;
  if (extra.listen !== undefined) body.listen = extra.listen;
  if (extra.cancelOnReply !== undefined) body.cancel_on_reply = extra.cancelOnReply;
  if (extra.recipientTimeZone !== undefined && extra.recipientTimeZone !== '') body.recipient_time_zone = String(extra.recipientTimeZone).trim();
  if (extra.dryRun === true) body.dry_run = true;
  return body;
}

function listQuery(filters: IDataObject): IDataObject {
  const qs: IDataObject = {};
  for (const [name, value] of Object.entries(filters)) {
    if (value === '' || value === undefined) continue;
    qs[name] = name === 'created_gte' || name === 'created_lte' ? new Date(String(value)).toISOString() : String(value);
  }
  return qs;
}

/** One item's call: what the API answered, as one or more output items. */
async function runItem(ctx: IExecuteFunctions, i: number, resource: string, operation: string): Promise<IDataObject | IDataObject[]> {
  const call = (request: Parameters<typeof voicenoteRequest>[0]) => voicenoteRequest.call(ctx, { ...request, itemIndex: i });
  const paged = (path: string, qs: IDataObject) =>
    voicenoteList.call(ctx, path, qs, {
      returnAll: ctx.getNodeParameter('returnAll', i) as boolean,
      limit: ctx.getNodeParameter('limit', i, 50) as number,
      itemIndex: i,
    });
  const id = (name: string) => encodeURIComponent(String(ctx.getNodeParameter(name, i)).trim());

  if (resource === 'voiceNote') {
    if (operation === 'send') {
      const extra = ctx.getNodeParameter('additionalFields', i, {}) as IDataObject;
      const key = String(extra.idempotencyKey ?? '').trim() || `n8n-${ctx.getExecutionId()}-${i}`;
      return call({ method: 'POST', path: '/send', body: sendBody(ctx, i), headers: { 'Idempotency-Key': key } });
    }
    if (operation === 'get') return call({ method: 'GET', path: `/messages/${id('messageId')}` });
    if (operation === 'cancel') return call({ method: 'POST', path: `/messages/${id('messageId')}/cancel` });
    if (operation === 'getAll') return paged('/messages', listQuery(ctx.getNodeParameter('filters', i, {}) as IDataObject));
  }
  if (resource === 'sender') {
    if (operation === 'get') return call({ method: 'GET', path: `/senders/${id('senderId')}` });
    if (operation === 'getAll') return paged('/senders', {});
  }
  if (resource === 'recipient' && operation === 'check') {
    const platform = ctx.getNodeParameter('platform', i) as string;
    const recipient = String(ctx.getNodeParameter('recipient', i)).trim();
    return call({ method: 'POST', path: '/recipients/check', body: { platform, recipient, session: sessionOf(ctx, i, platform) } });
  }
  if (resource === 'suppression') {
    if (operation === 'add') {
      const note = String(ctx.getNodeParameter('note', i, '') ?? '').trim();
      const entry: IDataObject = { platform: ctx.getNodeParameter('platform', i) as string, recipient: String(ctx.getNodeParameter('recipient', i)).trim() };
      if (note) entry.note = note;
      // One recipient per item: the answer's one entry (the one already listed, when it was).
      const added = await call({ method: 'POST', path: '/suppressions', body: { recipients: [entry] } });
      return ((added.data ?? []) as IDataObject[])[0] ?? {};
    }
    if (operation === 'getAll') return paged('/suppressions', listQuery(ctx.getNodeParameter('filters', i, {}) as IDataObject));
    if (operation === 'delete') {
      const suppressionId = String(ctx.getNodeParameter('suppressionId', i)).trim();
      await call({ method: 'DELETE', path: `/suppressions/${encodeURIComponent(suppressionId)}` });
      return { id: suppressionId, deleted: true };
    }
  }
  if (resource === 'usage' && operation === 'get') return call({ method: 'GET', path: '/usage' });
  throw new NodeOperationError(ctx.getNode(), `The operation "${operation}" of "${resource}" is not known`, { itemIndex: i });
}

export class Voicenote implements INodeType {
  description: INodeTypeDescription = {
    displayName: 'Voicenote',
    name: 'voicenote',
    icon: { light: 'file:voicenote.svg', dark: 'file:voicenote.dark.svg' },
    group: ['output'],
    version: 1,
    subtitle: '={{$parameter["operation"] + ": " + $parameter["resource"]}}',
    description: 'Send pre-recorded audio as native voice notes on LinkedIn, Telegram and WhatsApp',
    defaults: { name: 'Voicenote' },
    usableAsTool: true,
    inputs: [NodeConnectionTypes.Main],
    outputs: [NodeConnectionTypes.Main],
    credentials: [{ name: 'voicenoteApi', required: true }],
    properties: voicenoteProperties,
  };

  methods = {
    loadOptions: {
      /** The account's WhatsApp sessions known as senders (GET /senders), then "enter the session". */
      async getSenders(this: ILoadOptionsFunctions): Promise<INodePropertyOptions[]> {
        const platform = this.getCurrentNodeParameter('platform') as string | undefined;
        const senders = await voicenoteList.call(this, '/senders', {}, { returnAll: true, limit: 100 });
        const options: INodePropertyOptions[] = [];
        for (const sender of senders) {
          if (platform && sender.platform !== platform) continue;
          // A WhatsApp session's label starts with its session id (`ws_… +phone`): that is what a send names.
          const sessionId = sender.kind === 'whatsapp_session' ? String(sender.label ?? '').split(' ')[0] : '';
          if (!sessionId.startsWith('ws_')) continue;
          options.push({ name: `${String(sender.label)} (${String(sender.status)})`, value: sessionId, description: String(sender.id) });
        }
        options.push({ name: 'Enter the Session Below', value: ENTER_SESSION, description: 'A bot token, a session ID or LinkedIn cookies' });
        return options;
      },
    },
  };

  async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
    const items = this.getInputData();
    const out: INodeExecutionData[] = [];
    for (let i = 0; i < items.length; i++) {
      const resource = this.getNodeParameter('resource', i) as string;
      const operation = this.getNodeParameter('operation', i) as string;
      try {
        const answer = await runItem(this, i, resource, operation);
        out.push(...this.helpers.constructExecutionMetaData(this.helpers.returnJsonArray(answer), { itemData: { item: i } }));
      } catch (error) {
        if (!this.continueOnFail()) throw asNodeError(this.getNode(), error, i);
        out.push({ json: { error: (error as Error).message }, pairedItem: { item: i } });
      }
    }
    return [out];
  }
}
