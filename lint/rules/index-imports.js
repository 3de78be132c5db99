// A folder of src/ is a module: what it offers the rest of the tree is what its index.ts exports.
// An import that reaches past another folder's index.ts couples to a file the folder may move.
import path from "node:path";

const srcRoot = path.resolve(import.meta.dirname, "..", "..", "src");

function folderOf(file) {
  const relative = path.relative(srcRoot, file);
  return relative.startsWith("..") ? undefined : relative.split(path.sep)[0];
}

/** @type {import("eslint").Rule.RuleModule} */
export default {
  meta: {
    type: "problem",
    docs: { description: "Imports from another folder of src/ go through that folder's index.ts" },
    schema: [],
    messages: {
      deep: "Import '{{source}}' through '{{folder}}/index.ts'; export the name there if it is part of the folder's surface.",
    },
  },
  create(context) {
    const here = context.filename;
    const ownFolder = folderOf(here);
    function check(node) {
      const source = node.source?.value;
      if (typeof source !== "string" || !source.startsWith(".")) return;
      const target = path.resolve(path.dirname(here), source);
      const folder = folderOf(target);
      if (folder === undefined || folder === ownFolder) return;
      const insideFolder = path.relative(path.join(srcRoot, folder), target);
      if (insideFolder === "index.ts" || insideFolder === "") return;
      context.report({ node: node.source, messageId: "deep", data: { source, folder } });
    }
    return {
      ImportDeclaration: check,
      ExportNamedDeclaration: check,
      ExportAllDeclaration: check,
      ImportExpression: check,
    };
  },
};
