import { readdirSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { SRC } from "../support/import-walker.js";

/**
 * Every floating promise ends in one sink (docs/reliability.md, "No task's error reaches the
 * process"): everywhere in src/ (less src/harness/dashboard/static/, browser code shipped as is),
 * a promise is awaited, returned, handed to its owner (the worker's BackgroundTasks, a job's own
 * sink, a logger line, the harness's error hook) or to `settle(promise, onError)`
 * (src/task-sink.ts), which returns nothing. Found here, with the
 * type checker: a `void` of a promise, and an expression statement whose value is a promise
 * left to float. A "never rejects" comment is not a check; these are.
 */

/** Where the rule holds: all of src/, less browser code shipped as is (src/ relative). */
const SKIP = ["harness/dashboard/static/"];

function scopedFiles(): string[] {
  return readdirSync(SRC, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts") && !name.endsWith(".d.ts"))
    .filter((name) => !SKIP.some((place) => name.startsWith(place)))
    .map((name) => join(SRC, name));
}

const OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  types: ["node"],
};

/** True when `type` is a promise (or any thenable), or a union with one. */
function isThenable(checker: ts.TypeChecker, type: ts.Type): boolean {
  if (type.isUnion()) return type.types.some((t) => isThenable(checker, t));
  const then = type.getProperty("then");
  if (then === undefined) return false;
  const thenType = checker.getTypeOfSymbol(then);
  return thenType.getCallSignatures().length > 0;
}

/** `a = p`, `a ??= p`, …: the promise is kept by whoever holds `a`, not left to float. */
function isAssignment(node: ts.Expression): boolean {
  return (
    ts.isBinaryExpression(node) &&
    node.operatorToken.kind >= ts.SyntaxKind.FirstAssignment &&
    node.operatorToken.kind <= ts.SyntaxKind.LastAssignment
  );
}

/** The floating promises of `files` in `program`, as `file:line: text`. */
function floating(program: ts.Program, files: readonly string[], base: string): string[] {
  const checker = program.getTypeChecker();
  const found: string[] = [];
  for (const file of files) {
    const source = program.getSourceFile(file);
    if (source === undefined) throw new Error(`not in the program: ${file}`);
    const report = (node: ts.Node, what: string): void => {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
      found.push(`${file.slice(base.length)}:${line + 1}: ${what}: ${node.getText(source).split("\n")[0]}`);
    };
    const visit = (node: ts.Node): void => {
      // settle() is the one sink itself: the promise it makes handles every rejection.
      if (ts.isFunctionDeclaration(node) && node.name?.text === "settle" && file.endsWith("task-sink.ts"))
        return;
      if (ts.isVoidExpression(node) && isThenable(checker, checker.getTypeAtLocation(node.expression))) {
        report(node, "void of a promise");
      } else if (
        ts.isExpressionStatement(node) &&
        !ts.isVoidExpression(node.expression) &&
        !isAssignment(node.expression) &&
        isThenable(checker, checker.getTypeAtLocation(node.expression))
      ) {
        report(node, "floating promise");
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

describe("floating promises in src/", () => {
  it("finds no void of a promise and no floating promise anywhere in src/", () => {
    const files = scopedFiles();
    // The walk does read all of src/ (one that found nothing could not fail).
    expect(files.length).toBeGreaterThan(200);
    expect(files.some((file) => file.includes(`${join("cli", "commands")}`))).toBe(true);
    const program = ts.createProgram(files, OPTIONS);
    expect(floating(program, files, SRC)).toEqual([]);
  }, 60_000);

  it("finds a void of a promise and a floating one, and lets the owned ones be (so the check above can fail)", () => {
    const file = join(SRC, "worker", "__sample__.ts");
    const text = [
      "declare function work(): Promise<number>;",
      "declare function settle(p: PromiseLike<unknown>, onError: (err: unknown) => void): void;",
      "declare const tasks: { run(name: string, w: () => unknown): Promise<void> };",
      "export async function sample(): Promise<void> {",
      "  void work();",
      "  work().then(() => undefined);",
      "  void 0;",
      "  settle(work(), () => undefined);",
      "  await work();",
      "  const kept = tasks.run('x', work);",
      "  await kept;",
      "  let held: Promise<number> | undefined;",
      "  held ??= work();",
      "  await held;",
      "}",
    ].join("\n");
    const host = ts.createCompilerHost(OPTIONS);
    const read = host.getSourceFile.bind(host);
    host.getSourceFile = (name, language, onError) =>
      name === file ? ts.createSourceFile(name, text, language) : read(name, language, onError);
    host.fileExists = (
      (exists) => (name: string) =>
        name === file || exists(name)
    )(host.fileExists.bind(host));
    const program = ts.createProgram([file], OPTIONS, host);
    expect(floating(program, [file], SRC)).toEqual([
      "worker/__sample__.ts:5: void of a promise: void work()",
      "worker/__sample__.ts:6: floating promise: work().then(() => undefined);",
    ]);
  });
});
