// The linter's rules (npm run lint). Formatting is Prettier's business (eslint-config-prettier
// switches off every rule that would argue with it); the import direction is dependency-cruiser's
// (.dependency-cruiser.cjs). Type errors are tsc's (npm run typecheck), so rules that need type
// information are left out: the lint stays fast enough to run first in npm test.
import js from "@eslint/js";
import prettier from "eslint-config-prettier";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: [
      "**/node_modules/**",
      "**/dist/**",
      "artifacts/**",
      "cache/**",
      "typechain-types/**",
      "deployments/**",
      "test-artifacts/**",
      "clients/python/**",
      "docs/**",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // tsc's noUnusedLocals reports unused names; an unused parameter may document a signature.
      "@typescript-eslint/no-unused-vars": "off",
      // `value!` is used where the code has just established presence; tsc keeps it honest.
      "@typescript-eslint/no-non-null-assertion": "off",
      // `require()` is how CommonJS modules and the child-process guards load their peers.
      "@typescript-eslint/no-require-imports": "off",
      "no-constant-condition": ["error", { checkLoops: false }],
    },
  },
  {
    files: ["server/web/src/**"],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ["test/**", "clients/*/test/**", "scripts/**"],
    languageOptions: { globals: { ...globals.node, ...globals.mocha } },
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      // Chai's property assertions (`expect(x).to.be.empty`) are expressions by design.
      "@typescript-eslint/no-unused-expressions": "off",
    },
  },
  prettier,
);
