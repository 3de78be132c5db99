// What each public entry point exports, read by the TypeScript checker itself (values and types
// alike, `export *` followed), and which exported functions and options carry no doc comment.
import { API, SymbolFlags, type Checker, type Symbol as TsSymbol } from "typescript/unstable/sync";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../support/build.ts";

const packageExports = (
  JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
    exports: Record<string, string | { default: string }>;
  }
).exports;

/** The package's public subpaths ("." and "./<entry>") and the source file each one is built from. */
export const ENTRY_POINTS: Record<string, string> = Object.fromEntries(
  Object.entries(packageExports).flatMap(([subpath, target]) =>
    typeof target === "string"
      ? []
      : [[subpath, target.default.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts")]],
  ),
);

export interface EntryReport {
  names: string[];
  /** The names that exist at run time (functions, classes, constants): what `import("…")` holds. */
  values: string[];
  /** Exported functions without a doc comment. */
  undocumentedFunctions: string[];
  /** `<Interface>.<property>` of exported `…Options` interfaces without a doc comment. */
  undocumentedOptions: string[];
}

const hasDoc = (s: TsSymbol, checker: Checker): boolean => s.getDocumentationComment(checker).trim() !== "";

function report(checker: Checker, exports: readonly TsSymbol[]): EntryReport {
  const out: EntryReport = {
    names: exports.map((e) => e.name).sort(),
    values: [],
    undocumentedFunctions: [],
    undocumentedOptions: [],
  };
  for (const exported of exports) {
    const target = (exported.flags & SymbolFlags.Alias) !== 0 ? checker.getAliasedSymbol(exported) : exported;
    if ((target.flags & SymbolFlags.Value) !== 0) out.values.push(exported.name);
    if ((target.flags & SymbolFlags.Function) !== 0 && !hasDoc(target, checker))
      out.undocumentedFunctions.push(exported.name);
    if ((target.flags & SymbolFlags.Interface) !== 0 && exported.name.endsWith("Options")) {
      for (const property of checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(target))) {
        if (!hasDoc(property, checker)) out.undocumentedOptions.push(`${exported.name}.${property.name}`);
      }
    }
  }
  out.values.sort();
  return out;
}

export function publicApi(): Record<string, EntryReport> {
  const api = new API({ cwd: repoRoot });
  try {
    const snapshot = api.updateSnapshot({ openProjects: [join(repoRoot, "tsconfig.json")] });
    const project = snapshot.getProjects()[0]!;
    const out: Record<string, EntryReport> = {};
    for (const [subpath, file] of Object.entries(ENTRY_POINTS)) {
      const source = project.program.getSourceFile(join(repoRoot, file));
      const module = source === undefined ? undefined : project.checker.getSymbolAtLocation(source);
      if (module === undefined) throw new Error(`${file} is not in the project`);
      out[subpath] = report(project.checker, project.checker.getExportsOfModule(module));
    }
    return out;
  } finally {
    api.close();
  }
}
