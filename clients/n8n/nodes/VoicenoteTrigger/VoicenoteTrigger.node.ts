import type {
  IDataObject,
  IHookFunctions,
  INodeType,
  INodeTypeDescription,
  IWebhookFunctions,
  IWebhookResponseData,
} from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';
import { VOICENOTE_EVENTS } from '../../shared/events';
import { signatureProblem } from '../../shared/signature';
import { asNodeError, voicenoteRequest } from '../../shared/transport';

/** What the trigger keeps in the workflow's static data: the endpoint it made, and its signing secret. */
interface EndpointState extends IDataObject {
  endpointId?: string;
  secret?: string;
}

const sameEvents = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().join() === [...b].sort().join();

const header = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

export class VoicenoteTrigger implements INodeType {
  description: INodeTypeDescription = {
    displayName: 'Voicenote Trigger',
    name: 'voicenoteTrigger',
    icon: { light: 'file:voicenote.svg', dark: 'file:voicenote.dark.svg' },
    group: ['trigger'],
    version: 1,
    subtitle: '={{$parameter["events"].join(", ")}}',
    description: 'Starts the workflow when voicenote sends a webhook event (delivered, replied, …)',
    defaults: { name: 'Voicenote Trigger' },
    inputs: [],
    outputs: [NodeConnectionTypes.Main],
    credentials: [{ name: 'voicenoteApi', required: true }],
    webhooks: [{ name: 'default', httpMethod: 'POST', responseMode: 'onReceived', path: 'webhook' }],
    properties: [
      {
        displayName: 'Events',
        name: 'events',
        type: 'multiOptions',
        required: true,
        options: VOICENOTE_EVENTS.map((event) => ({ ...event })),
        default: ['voice_note.replied'],
        description: 'The events that start the workflow',
      },
    ],
  };

  webhookMethods = {
    default: {
      /** True when this workflow's endpoint still exists as it was made (after a restart, too). */
      async checkExists(this: IHookFunctions): Promise<boolean> {
        const state = this.getWorkflowStaticData('node') as EndpointState;
        const url = this.getNodeWebhookUrl('default');
        const events = this.getNodeParameter('events') as string[];
        const listed = await voicenoteRequest.call(this, { method: 'GET', path: '/webhook_endpoints' });
        const found = ((listed.data ?? []) as IDataObject[]).filter((endpoint) => endpoint.url === url);
        const kept = found.find((endpoint) => endpoint.id === state.endpointId);
        if (kept && state.secret && sameEvents(kept.events as string[], events)) return true;
        // An endpoint for this URL whose secret is not kept here (or with other events) cannot be used: it
        // is replaced, so there is never a second endpoint for one trigger.
        for (const endpoint of found) {
          await voicenoteRequest.call(this, { method: 'DELETE', path: `/webhook_endpoints/${encodeURIComponent(String(endpoint.id))}` });
        }
        delete state.endpointId;
        delete state.secret;
        return false;
      },

      async create(this: IHookFunctions): Promise<boolean> {
        const state = this.getWorkflowStaticData('node') as EndpointState;
        const workflow = this.getWorkflow();
        const created = await voicenoteRequest.call(this, {
          method: 'POST',
          path: '/webhook_endpoints',
          body: {
            url: this.getNodeWebhookUrl('default') as string,
            events: this.getNodeParameter('events') as string[],
            description: `n8n workflow ${workflow.name ?? ''} (${workflow.id ?? ''})`.replace(/\s+/g, ' '),
          },
        });
        state.endpointId = String(created.id);
        state.secret = String(created.secret);
        return true;
      },

      async delete(this: IHookFunctions): Promise<boolean> {
        const state = this.getWorkflowStaticData('node') as EndpointState;
        if (state.endpointId) {
          try {
            await voicenoteRequest.call(this, { method: 'DELETE', path: `/webhook_endpoints/${encodeURIComponent(state.endpointId)}` });
          } catch (error) {
            // Already gone (deleted by hand): nothing is left to remove.
            if ((error as { httpCode?: string }).httpCode !== '404') throw asNodeError(this.getNode(), error);
          }
        }
        delete state.endpointId;
        delete state.secret;
        return true;
      },
    },
  };

  /** A delivery: verified against the kept secret (else 401 and no execution), then the event's data. */
  async webhook(this: IWebhookFunctions): Promise<IWebhookResponseData> {
    const request = this.getRequestObject() as ReturnType<IWebhookFunctions['getRequestObject']> & { rawBody?: Buffer };
    const state = this.getWorkflowStaticData('node') as EndpointState;
    const body = request.rawBody ? request.rawBody.toString('utf8') : JSON.stringify(request.body);
    const problem = state.secret
      ? signatureProblem(state.secret, {
          id: header(request.headers['webhook-id']),
          timestamp: header(request.headers['webhook-timestamp']),
          signature: header(request.headers['webhook-signature']),
          body,
        })
      : 'this trigger has no signing secret (activate the workflow again)';
    if (problem) {
      this.getResponseObject().status(401).json({ error: { code: 'unauthorized', message: `signature not verified: ${problem}` } });
      return { noWebhookResponse: true };
    }
    const event = JSON.parse(body) as { type?: string; timestamp?: string; data?: IDataObject };
    const events = this.getNodeParameter('events') as string[];
    // An event this trigger does not listen to (an endpoint's events can be changed by hand) starts nothing.
    if (!event.type || !events.includes(event.type)) return { webhookResponse: 'ignored' };
    const item: IDataObject = {
      event_type: event.type,
      event_id: header(request.headers['webhook-id']),
      event_timestamp: event.timestamp,
      ...(event.data ?? {}),
    };
    return { workflowData: [this.helpers.returnJsonArray([item])] };
  }
}
