import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { BUILT_IN_OPT_OUT_KEYWORDS, foldKeyword } from '../core/opt-out-keywords.js';
import type { Services } from '../services.js';
import { readOptOutSettings, writeOptOutSettings, type OptOutSettings } from '../store/opt-out-settings.js';
import { invalidParameter } from './errors.js';
import { withErrors } from './schemas.js';
import { rejectUnknownFields } from './unknown-fields.js';

export const MAX_OWN_KEYWORDS = 50;
export const MAX_KEYWORD_LENGTH = 64;

export const OptOutSettingsView = Type.Object({
  enabled: Type.Boolean({ description: 'Whether a reply that is an opt-out keyword suppresses its sender (default true)' }),
  keywords: Type.Array(Type.String(), { description: "The account's own keywords, folded (lower case, no accents or punctuation), beside the built-in ones" }),
  built_in_keywords: Type.Record(Type.String(), Type.Array(Type.String()), { description: 'The built-in keywords by language (sms: the SMS industry\'s), folded' }),
});
const PatchBody = Type.Object({
  enabled: Type.Optional(Type.Boolean()),
  keywords: Type.Optional(Type.Array(Type.String(), { description: `At most ${MAX_OWN_KEYWORDS}, each at most ${MAX_KEYWORD_LENGTH} characters; replaces the account's own list ([] clears it)` })),
});

const view = (settings: OptOutSettings) => ({
  enabled: settings.enabled,
  keywords: settings.keywords,
  built_in_keywords: Object.fromEntries(Object.entries(BUILT_IN_OPT_OUT_KEYWORDS).map(([language, words]) => [language, [...words]])),
});

/** The account's own keywords, folded and without repeats; a bad one is a 422 naming it. */
export function checkOwnKeywords(keywords: readonly string[]): string[] {
  if (keywords.length > MAX_OWN_KEYWORDS) throw invalidParameter('keywords', `keywords holds at most ${MAX_OWN_KEYWORDS} entries (got ${keywords.length})`);
  const folded: string[] = [];
  for (const [i, keyword] of keywords.entries()) {
    const one = foldKeyword(keyword);
    if (one === '' || keyword.length > MAX_KEYWORD_LENGTH) {
      throw invalidParameter(`keywords[${i}]`, `keywords[${i}] must have letters or digits and at most ${MAX_KEYWORD_LENGTH} characters`);
    }
    if (!folded.includes(one)) folded.push(one);
  }
  return folded;
}

/** GET and PATCH /opt_out_settings (docs/sending.md, "Opt-outs and suppressions"): per account and environment. */
export function registerOptOutSettingsRoutes(app: FastifyInstance, services: Services): void {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['suppressions'];

  routes.get(
    '/opt_out_settings',
    { schema: { summary: 'How replies opt recipients out', tags, response: { 200: OptOutSettingsView, ...withErrors() } } },
    async (request) => view(await readOptOutSettings(services.db.kysely, request.caller!)),
  );

  routes.patch(
    '/opt_out_settings',
    {
      schema: {
        summary: 'Turn opt-outs by reply on or off, or set the account\'s own keywords',
        description: 'Fields left out stay as they are. Own keywords match as the built-in ones do: the whole reply, folded.',
        tags,
        body: PatchBody,
        response: { 200: OptOutSettingsView, ...withErrors(400, 415, 422) },
      },
      preValidation: async (request) => rejectUnknownFields(request.body, ['enabled', 'keywords']),
    },
    async (request) => {
      const caller = request.caller!;
      const current = await readOptOutSettings(services.db.kysely, caller);
      const next: OptOutSettings = {
        enabled: request.body.enabled ?? current.enabled,
        keywords: request.body.keywords !== undefined ? checkOwnKeywords(request.body.keywords) : current.keywords,
      };
      await writeOptOutSettings(services.db.kysely, caller, next, Date.now());
      return view(next);
    },
  );
}
