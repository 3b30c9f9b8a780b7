/**
 * zod 4 lets an error thrown inside `.transform()`, `.refine()` or `.superRefine()` escape
 * `safeParseAsync` instead of becoming an issue. The job then fails with RUNLET_INPUT_INVALID, and
 * this finds which field threw, so the message names it as a normal input error would.
 */

/** The parts of a zod 4 schema's definition this walk reads (core `_zod.def`, any zod copy). */
interface SchemaDef {
  readonly type?: string;
  readonly shape?: Record<string, unknown>;
  readonly element?: unknown;
  readonly innerType?: unknown;
}

function defOf(schema: unknown): SchemaDef | undefined {
  const internals = (schema as { _zod?: { def?: unknown } } | null)?._zod;
  const def = internals?.def;
  return typeof def === "object" && def !== null ? (def as SchemaDef) : undefined;
}

/** Parses `value` with `schema`; true when the parse threw instead of answering. */
async function throws(schema: unknown, value: unknown): Promise<boolean> {
  try {
    await (schema as { safeParseAsync(v: unknown): Promise<unknown> }).safeParseAsync(value);
    return false;
  } catch {
    // The throw itself is what is being looked for; the caller already holds the first one.
    return true;
  }
}

/**
 * The path of the deepest part of `schema` whose parse of the matching part of `value` throws,
 * found by parsing objects' fields and arrays' items one at a time; `[]` when only the whole
 * throws (an object-level refine). Runs the schema's transforms again: only on this failure path.
 */
export async function locateSchemaThrow(schema: unknown, value: unknown): Promise<Array<string | number>> {
  const def = defOf(schema);
  if (def === undefined) return [];
  if (def.type === "optional" || def.type === "nullable" || def.type === "default") {
    return value === undefined || value === null ? [] : locateSchemaThrow(def.innerType, value);
  }
  if (def.type === "object" && def.shape !== undefined && typeof value === "object" && value !== null) {
    for (const [key, field] of Object.entries(def.shape)) {
      const part = (value as Record<string, unknown>)[key];
      if (await throws(field, part)) return [key, ...(await locateSchemaThrow(field, part))];
    }
  }
  if (def.type === "array" && Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      if (await throws(def.element, item)) return [index, ...(await locateSchemaThrow(def.element, item))];
    }
  }
  return [];
}

/** The RUNLET_INPUT_INVALID message for a schema that threw `thrown` at `path`, in zod's prettified form. */
export function schemaThrewMessage(path: ReadonlyArray<string | number>, thrown: unknown): string {
  const what =
    thrown instanceof Error
      ? `${thrown.name || "Error"}: ${thrown.message}`
      : `a non-Error value: ${String(thrown)}`;
  const where = path.length === 0 ? "" : `\n  → at ${path.join(".")}`;
  return `input is invalid:\n✖ the input schema threw ${what}${where}`;
}
