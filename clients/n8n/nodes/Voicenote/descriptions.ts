import type { INodeProperties, INodePropertyOptions } from 'n8n-workflow';
import { PLATFORMS } from './platforms';
import { suppressionProperties } from './suppression';

/** Where the sender comes from when it is not one of the account's listed senders. */
export const ENTER_SESSION = '__enter';

const show = (resource: string, operation: string[]) => ({ show: { resource: [resource], operation } });

export const resourceProperty: INodeProperties = {
  displayName: 'Resource',
  name: 'resource',
  type: 'options',
  noDataExpression: true,
  options: [
    { name: 'Recipient', value: 'recipient' },
    { name: 'Sender', value: 'sender' },
    { name: 'Suppression', value: 'suppression' },
    { name: 'Usage', value: 'usage' },
    { name: 'Voice Note', value: 'voiceNote' },
  ],
  default: 'voiceNote',
};

/** The operations of one resource, shown when it is chosen. */
const operationsOf = (resource: string, options: INodePropertyOptions[], defaultOperation: string): INodeProperties => ({
  displayName: 'Operation',
  name: 'operation',
  type: 'options',
  noDataExpression: true,
  displayOptions: { show: { resource: [resource] } },
  options,
  default: defaultOperation,
});

const operations: INodeProperties[] = [
  operationsOf(
    'voiceNote',
    [
      { name: 'Cancel', value: 'cancel', action: 'Cancel a voice note', description: 'Take back a queued voice note' },
      { name: 'Get', value: 'get', action: 'Get a voice note', description: 'Get a voice note with its attempts, receipts and replies' },
      { name: 'Get Many', value: 'getAll', action: 'Get many voice notes', description: 'List voice notes, newest first' },
      { name: 'Send', value: 'send', action: 'Send a voice note', description: 'Send an audio file as a native voice note' },
    ],
    'send',
  ),
  operationsOf(
    'sender',
    [
      { name: 'Get', value: 'get', action: 'Get a sender', description: 'Get a sender and its health' },
      { name: 'Get Many', value: 'getAll', action: 'Get many senders', description: 'List the senders and their health' },
    ],
    'getAll',
  ),
  operationsOf('recipient', [{ name: 'Check', value: 'check', action: 'Check a recipient', description: 'Ask the platform whether a recipient exists' }], 'check'),
  operationsOf('usage', [{ name: 'Get', value: 'get', action: 'Get usage', description: "Get this billing period's usage and limits" }], 'get'),
];

/** Platform, recipient and sender: what Send and Recipient → Check both take. */
const addressing = (resource: string, operation: string): INodeProperties[] => [
  {
    displayName: 'Platform',
    name: 'platform',
    type: 'options',
    options: PLATFORMS,
    default: 'telegram',
    required: true,
    displayOptions: show(resource, [operation]),
  },
  {
    displayName: 'Recipient',
    name: 'recipient',
    type: 'string',
    default: '',
    required: true,
    placeholder: '14155550100',
    description:
      'WhatsApp: phone number with country code, no +. Telegram: chat ID or @channelusername. LinkedIn: public profile ID, profile URL or conversation URN.',
    displayOptions: show(resource, [operation]),
  },
  {
    displayName: 'Sender Name or ID',
    name: 'sender',
    type: 'options',
    typeOptions: { loadOptionsMethod: 'getSenders', loadOptionsDependsOn: ['platform'] },
    default: ENTER_SESSION,
    description:
      'A WhatsApp session of this account, or enter the session below (a Telegram bot token or linked account, LinkedIn cookies). Choose from the list, or specify an ID using an <a href="https://docs.n8n.io/code/expressions/">expression</a>.',
    displayOptions: show(resource, [operation]),
  },
  {
    displayName: 'Session ID',
    name: 'sessionId',
    type: 'string',
    default: '',
    placeholder: 'ws_… or ts_…',
    description: 'A WhatsApp session (ws_…) or a linked Telegram account (ts_…) of this account',
    displayOptions: { show: { resource: [resource], operation: [operation], sender: [ENTER_SESSION], platform: ['whatsapp', 'telegram'] } },
  },
  {
    displayName: 'Bot Token',
    name: 'botToken',
    type: 'string',
    typeOptions: { password: true },
    default: '',
    description: "A Telegram bot's token from @BotFather (leave empty when a session ID is given)",
    displayOptions: { show: { resource: [resource], operation: [operation], sender: [ENTER_SESSION], platform: ['telegram'] } },
  },
  {
    displayName: 'Li_at Cookie',
    name: 'liAt',
    type: 'string',
    typeOptions: { password: true },
    default: '',
    displayOptions: { show: { resource: [resource], operation: [operation], sender: [ENTER_SESSION], platform: ['linkedin'] } },
  },
  {
    displayName: 'CSRF Token',
    name: 'csrfToken',
    type: 'string',
    typeOptions: { password: true },
    default: '',
    placeholder: 'ajax:…',
    description: 'The JSESSIONID cookie of the same browser session',
    displayOptions: { show: { resource: [resource], operation: [operation], sender: [ENTER_SESSION], platform: ['linkedin'] } },
  },
  {
    displayName: 'User Agent',
    name: 'userAgent',
    type: 'string',
    default: '',
    description: "The signed-in browser's navigator.userAgent (recommended: LinkedIn ends sessions used from another browser)",
    displayOptions: { show: { resource: [resource], operation: [operation], sender: [ENTER_SESSION], platform: ['linkedin'] } },
  },
  {
    displayName: 'Cookies',
    name: 'cookies',
    type: 'string',
    typeOptions: { password: true },
    default: '',
    description: 'The whole Cookie header of a linkedin.com request from that browser (recommended)',
    displayOptions: { show: { resource: [resource], operation: [operation], sender: [ENTER_SESSION], platform: ['linkedin'] } },
  },
];

const sendFields: INodeProperties[] = [
  {
    displayName: 'Proxy',
    name: 'proxy',
    type: 'string',
    typeOptions: { password: true },
    default: '',
    placeholder: 'socks5://user:password@proxy.example.com:1080',
    description:
      "This sender's own proxy (http://, https://, socks5:// or socks5h://), checked, then kept for its later sends; empty keeps the one it has",
    displayOptions: { show: { resource: ['voiceNote'], operation: ['send'], sender: [ENTER_SESSION], platform: ['telegram', 'linkedin'] } },
  },
  {
    displayName: 'Audio URL',
    name: 'audioUrl',
    type: 'string',
    default: '',
    required: true,
    placeholder: 'https://example.com/hello.mp3',
    description: 'An http(s) URL of the audio (any common format; it is converted for the platform)',
    displayOptions: show('voiceNote', ['send']),
  },
  {
    displayName: 'Additional Fields',
    name: 'additionalFields',
    type: 'collection',
    placeholder: 'Add Field',
    default: {},
    displayOptions: show('voiceNote', ['send']),
    options: [
      {
        displayName: 'Cancel On Reply',
        name: 'cancelOnReply',
        type: 'boolean',
        default: false,
        description: 'Whether a reply from the recipient before Send At cancels the note (needs Send At)',
      },
      { displayName: 'Caption', name: 'caption', type: 'string', default: '', description: 'Telegram only, at most 1,024 characters' },
      {
        displayName: 'Dry Run',
        name: 'dryRun',
        type: 'boolean',
        default: false,
        description:
          'Whether to only check the send (sender and its health, quota, rhythm, recipient where cheap, the audio fetched): the output is each check, and nothing is stored, sent or counted',
      },
      {
        displayName: 'Duration (Seconds)',
        name: 'duration',
        type: 'number',
        typeOptions: { minValue: 1 },
        default: 1,
        description: 'Detected when not given; LinkedIn takes at most 60',
      },
      {
        displayName: 'Idempotency Key',
        name: 'idempotencyKey',
        type: 'string',
        default: '',
        description:
          'Sends with the same key within 24 hours are done once. When not given: n8n-&lt;execution ID&gt;-&lt;item index&gt;, so a retried execution step does not send twice.',
      },
      {
        displayName: 'Listen for Replies',
        name: 'listen',
        type: 'boolean',
        default: false,
        description: 'Whether to hear the replies to a Telegram bot or a LinkedIn session (WhatsApp sessions are always heard)',
      },
      {
        displayName: 'Recipient Time Zone',
        name: 'recipientTimeZone',
        type: 'string',
        default: '',
        placeholder: 'America/New_York',
        description: "The recipient's IANA time zone: the account's send window then applies in this zone as well as its own",
      },
      {
        displayName: 'Recording Indicator',
        name: 'recordingIndicator',
        type: 'boolean',
        default: false,
        description: 'Whether to show "recording…" for about the note\'s length first (Telegram and WhatsApp)',
      },
      { displayName: 'Send At', name: 'sendAt', type: 'dateTime', default: '', description: 'Send later, at this moment' },
    ],
  },
];

const messageId = (operations: string[]): INodeProperties => ({
  displayName: 'Message ID',
  name: 'messageId',
  type: 'string',
  default: '',
  required: true,
  placeholder: 'msg_…',
  displayOptions: show('voiceNote', operations),
});

const paging = (resource: string): INodeProperties[] => [
  {
    displayName: 'Return All',
    name: 'returnAll',
    type: 'boolean',
    default: false,
    description: 'Whether to return all results or only up to a given limit',
    displayOptions: show(resource, ['getAll']),
  },
  {
    displayName: 'Limit',
    name: 'limit',
    type: 'number',
    typeOptions: { minValue: 1 },
    default: 50,
    description: 'Max number of results to return',
    displayOptions: { show: { resource: [resource], operation: ['getAll'], returnAll: [false] } },
  },
];

const listFilters: INodeProperties = {
  displayName: 'Filters',
  name: 'filters',
  type: 'collection',
  placeholder: 'Add Filter',
  default: {},
  displayOptions: show('voiceNote', ['getAll']),
  options: [
    { displayName: 'Created After', name: 'created_gte', type: 'dateTime', default: '' },
    { displayName: 'Created Before', name: 'created_lte', type: 'dateTime', default: '' },
    {
      displayName: 'Platform',
      name: 'platform',
      type: 'options',
      options: PLATFORMS,
      default: 'telegram',
    },
    { displayName: 'Recipient', name: 'recipient', type: 'string', default: '' },
    { displayName: 'Replied', name: 'replied', type: 'boolean', default: true, description: 'Whether to list only notes that were replied to (or only the others)' },
    {
      displayName: 'Status',
      name: 'status',
      type: 'options',
      options: [
        { name: 'Canceled', value: 'canceled' },
        { name: 'Delivered', value: 'delivered' },
        { name: 'Failed', value: 'failed' },
        { name: 'Processing', value: 'processing' },
        { name: 'Queued', value: 'queued' },
      ],
      default: 'delivered',
    },
  ],
};

const senderId: INodeProperties = {
  displayName: 'Sender ID',
  name: 'senderId',
  type: 'string',
  default: '',
  required: true,
  placeholder: 'snd_…',
  displayOptions: show('sender', ['get']),
};

export const voicenoteProperties: INodeProperties[] = [
  resourceProperty,
  ...operations,
  ...addressing('voiceNote', 'send'),
  ...sendFields,
  messageId(['get', 'cancel']),
  ...paging('voiceNote'),
  listFilters,
  senderId,
  ...paging('sender'),
  ...addressing('recipient', 'check'),
  ...suppressionProperties,
];
