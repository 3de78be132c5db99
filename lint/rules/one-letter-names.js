// One-letter names read as noise once a function grows past a line; inside a short lambda such as
// `(e) => e.id` the name's whole life is in view, so there it is allowed (an expression body the
// formatter wrapped onto a second line still counts as short). `_` marks an unused slot, and a
// generic's type parameter keeps the language's own convention (`T`).
const SHORT_LAMBDA_LINES = 2;
const TYPE_PARAMETER_PARENTS = new Set(["TSTypeParameter", "TSMappedType"]);

const isShortLambda = (fn) =>
  fn?.type === "ArrowFunctionExpression" &&
  fn.body.type !== "BlockStatement" &&
  fn.loc.end.line - fn.loc.start.line < SHORT_LAMBDA_LINES;

const PATTERN_PARTS = new Set(["ArrayPattern", "ObjectPattern", "Property", "AssignmentPattern", "RestElement"]);

/** The arrow function whose parameter list declares this name, destructured or not. */
function declaringArrow(identifier) {
  let node = identifier;
  while (PATTERN_PARTS.has(node.parent.type)) node = node.parent;
  const parent = node.parent;
  return parent.type === "ArrowFunctionExpression" && parent.params.includes(node) ? parent : undefined;
}

/** @type {import("eslint").Rule.RuleModule} */
export default {
  meta: {
    type: "suggestion",
    docs: { description: "No one-letter names outside short one-line lambdas" },
    schema: [],
    messages: { oneLetter: "'{{name}}' is a one-letter name; give it a name that says what it holds." },
  },
  create(context) {
    return {
      "Program:exit"() {
        const scopes = [context.sourceCode.scopeManager.globalScope];
        while (scopes.length > 0) {
          const scope = scopes.pop();
          scopes.push(...scope.childScopes);
          for (const variable of scope.variables) {
            if (variable.name.length !== 1 || variable.name === "_") continue;
            for (const definition of variable.defs) {
              if (TYPE_PARAMETER_PARENTS.has(definition.name.parent.type)) continue;
              if (isShortLambda(declaringArrow(definition.name))) continue;
              context.report({ node: definition.name, messageId: "oneLetter", data: { name: variable.name } });
            }
          }
        }
      },
    };
  },
};
