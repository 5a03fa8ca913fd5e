import type { INodeProperties } from 'n8n-workflow';
import { PLATFORMS } from './platforms';

/**
 * Suppression → Add, Get Many, Delete: the account's suppression list (POST, GET and DELETE
 * /suppressions). A listed recipient is never sent to again: a send to them fails with
 * `recipient_suppressed`, and their waiting notes are canceled.
 */
const show = (operation: string[]) => ({ show: { resource: ['suppression'], operation } });

const PLATFORM_OR_ALL = [{ name: 'All Platforms', value: '*' }, ...PLATFORMS];

export const suppressionProperties: INodeProperties[] = [
  {
    displayName: 'Operation',
    name: 'operation',
    type: 'options',
    noDataExpression: true,
    displayOptions: { show: { resource: ['suppression'] } },
    options: [
      { name: 'Add', value: 'add', action: 'Add a recipient to the suppression list', description: 'Never send to this recipient again' },
      { name: 'Delete', value: 'delete', action: 'Delete a suppression', description: 'Take a recipient off the suppression list' },
      { name: 'Get Many', value: 'getAll', action: 'Get many suppressions', description: 'List the suppression list, newest first' },
    ],
    default: 'add',
  },
  {
    displayName: 'Platform',
    name: 'platform',
    type: 'options',
    options: PLATFORM_OR_ALL,
    default: 'whatsapp',
    required: true,
    displayOptions: show(['add']),
  },
  {
    displayName: 'Recipient',
    name: 'recipient',
    type: 'string',
    default: '',
    required: true,
    placeholder: '14155550100',
    description: 'As a send takes it, or as people write it (a WhatsApp number with +, a LinkedIn profile URL, a Telegram @username)',
    displayOptions: show(['add']),
  },
  {
    displayName: 'Note',
    name: 'note',
    type: 'string',
    default: '',
    description: 'Why the recipient is listed (kept with the entry)',
    displayOptions: show(['add']),
  },
  {
    displayName: 'Suppression ID',
    name: 'suppressionId',
    type: 'string',
    default: '',
    required: true,
    placeholder: 'sup_…',
    displayOptions: show(['delete']),
  },
  {
    displayName: 'Return All',
    name: 'returnAll',
    type: 'boolean',
    default: false,
    description: 'Whether to return all results or only up to a given limit',
    displayOptions: show(['getAll']),
  },
  {
    displayName: 'Limit',
    name: 'limit',
    type: 'number',
    typeOptions: { minValue: 1 },
    default: 50,
    description: 'Max number of results to return',
    displayOptions: { show: { resource: ['suppression'], operation: ['getAll'], returnAll: [false] } },
  },
  {
    displayName: 'Filters',
    name: 'filters',
    type: 'collection',
    placeholder: 'Add Filter',
    default: {},
    displayOptions: show(['getAll']),
    options: [
      { displayName: 'Platform', name: 'platform', type: 'options', options: PLATFORM_OR_ALL, default: 'whatsapp' },
      { displayName: 'Recipient', name: 'recipient', type: 'string', default: '', description: 'Only this recipient, in any of its forms' },
      {
        displayName: 'Source',
        name: 'source',
        type: 'options',
        options: [
          { name: 'API', value: 'api' },
          { name: 'Dashboard', value: 'dashboard' },
          { name: 'Import', value: 'import' },
          { name: 'Reply (Opted Out)', value: 'reply' },
        ],
        default: 'api',
      },
    ],
  },
];
