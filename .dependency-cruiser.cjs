/**
 * Which module may import which (`npm run check:imports`, a step of `npm test`). README, "How it works",
 * tells the same order in words.
 *
 * Layers, lowest first. A module may import from its own layer and from any layer below it, never from
 * one above: a lower layer that needs something of a higher one declares the interface it consumes,
 * and the higher one implements it (app.ts wires the two). Type-only imports count too.
 */
const LAYERS = [
  { name: 'base', what: 'ids, sealing, plans, config, logging', path: '^src/(core/|config\\.ts$|logger\\.ts$|heap\\.ts$|secret-key\\.ts$|package-info\\.ts$)' },
  { name: 'storage-and-audio', what: 'tables, transactions, the webhook outbox; fetching and converting audio', path: '^src/(store|audio)/' },
  // What listeners hear (a reply, a sender's status) and the one recorder that writes it: below the platforms, whose listeners call it.
  { name: 'inbound', what: 'the heard shape and its recorder', path: '^src/inbound/' },
  { name: 'platforms', what: 'one folder per platform: rules, adapters, live connections', path: '^src/platforms/' },
  { name: 'work', what: 'the delivery worker, the webhook sender, housekeeping, account administration', path: '^src/(delivery|webhooks|housekeeping|admin)/' },
  // metrics/exposure.ts is the /metrics HTTP endpoint, so it sits with the HTTP layer below.
  { name: 'observers', what: 'the message log and metrics: they implement what the worker asks for', path: '^src/(message-log/|metrics/(?!exposure\\.ts$))' },
  { name: 'http', what: 'API routes, the dashboard, the services they share, the /metrics endpoint', path: '^src/(api/|dashboard/|services\\.ts$|metrics/exposure\\.ts$)' },
  { name: 'server', what: 'the Fastify server', path: '^src/server\\.ts$' },
  { name: 'app', what: 'builds the services and wires the layers together', path: '^src/app\\.ts$' },
  { name: 'cli', what: 'the command line', path: '^src/(cli\\.ts$|cli/)' },
];

const upwardRules = LAYERS.flatMap((lower, i) =>
  LAYERS.slice(i + 1).map((higher) => ({
    name: `${lower.name}-must-not-import-${higher.name}`,
    comment:
      `A module of layer "${lower.name}" (${lower.what}) imports one of the higher layer "${higher.name}" (${higher.what}). ` +
      'Imports run downwards only: declare the interface the lower module needs next to it and let the higher one implement it (wired in src/app.ts).',
    severity: 'error',
    from: { path: lower.path },
    to: { path: higher.path },
  })),
);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules import one another in a circle. Move what both need into a lower module, or pass it in.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'every-module-has-a-layer',
      comment: 'A module of src/ that no layer of .dependency-cruiser.cjs names: add it to the layer it belongs to.',
      severity: 'error',
      from: { path: '^src/', pathNot: LAYERS.map((layer) => `(${layer.path})`).join('|') },
      to: {},
    },
    ...upwardRules,
  ],
  options: {
    // Type-only imports count: a type from a higher layer ties the lower one to it all the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    // Only the source's own modules are looked at: packages are not resolved into, which keeps the check to seconds.
    includeOnly: '^src/',
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
