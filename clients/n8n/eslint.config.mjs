// n8n's own lint rules for community node packages (the rules `n8n-node lint` runs), offline.
import { n8nCommunityNodesPlugin } from '@n8n/eslint-plugin-community-nodes';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'scripts/**', 'eslint.config.mjs'] },
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser },
  },
  n8nCommunityNodesPlugin.configs.recommended,
);
