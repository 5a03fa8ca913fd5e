import type { IAuthenticateGeneric, ICredentialTestRequest, ICredentialType, INodeProperties } from 'n8n-workflow';

export class VoicenoteApi implements ICredentialType {
  name = 'voicenoteApi';

  displayName = 'Voicenote API';

  icon = { light: 'file:voicenote.svg', dark: 'file:voicenote.dark.svg' } as const;

  documentationUrl = 'https://www.npmjs.com/package/n8n-nodes-voicenote#credentials';

  properties: INodeProperties[] = [
    {
      displayName: 'URL',
      name: 'url',
      type: 'string',
      default: 'http://localhost:3000',
      placeholder: 'https://voicenote.example.com',
      description: 'Where the voicenote service answers, without /api/v1',
      required: true,
    },
    {
      displayName: 'API Key',
      name: 'apiKey',
      type: 'string',
      typeOptions: { password: true },
      default: '',
      description: 'An sk_test_ key uses the sandbox; an sk_live_ key delivers for real',
      required: true,
    },
  ];

  authenticate: IAuthenticateGeneric = {
    type: 'generic',
    properties: {
      headers: {
        Authorization: '=Bearer {{$credentials.apiKey}}',
      },
    },
  };

  // GET /usage answers any valid key. n8n's request-based test shows only the HTTP status text of a
  // refusal, so the service's own words for its 401 are given here.
  test: ICredentialTestRequest = {
    request: {
      baseURL: '={{$credentials.url.replace(/\\/+$/, "")}}',
      url: '/api/v1/usage',
    },
    rules: [
      {
        type: 'responseCode',
        properties: { value: 401, message: 'unauthorized: invalid, revoked or expired API key (or the service at this URL refused it)' },
      },
    ],
  };
}
