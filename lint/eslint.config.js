// The rules a reader feels: short lines, names that say what they hold, folders entered through
// their index.ts, no casting a dependency into a shape it never promised. Formatting is Prettier's.
import tseslint from "typescript-eslint";
import indexImports from "./rules/index-imports.js";
import oneLetterNames from "./rules/one-letter-names.js";

const turnstream = { rules: { "one-letter-names": oneLetterNames, "index-imports": indexImports } };

export default [
  { ignores: ["**/node_modules/**", "dist/**", "lint/**", "test/fixtures/cli/**"] },
  {
    files: ["**/*.ts", "**/*.mjs", "**/*.js"],
    languageOptions: { parser: tseslint.parser, ecmaVersion: "latest", sourceType: "module" },
    plugins: { turnstream },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      "max-len": [
        "error",
        { code: 120, ignoreUrls: true, ignoreRegExpLiterals: true, ignoreStrings: true, ignoreTemplateLiterals: true },
      ],
      "turnstream/one-letter-names": "error",
      "no-restricted-syntax": [
        "error",
        {
          selector:
            "TSAsExpression[expression.type='TSAsExpression'][expression.typeAnnotation.type='TSUnknownKeyword']",
          message:
            "`as unknown as` claims a shape nobody promised; use the dependency's public API or a checked parse.",
        },
      ],
    },
  },
  { files: ["src/**/*.ts"], rules: { "turnstream/index-imports": "error" } },
];
