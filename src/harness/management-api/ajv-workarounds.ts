/**
 * The document's schemas with one rewrite that does not change what they accept: an `if`/`then`
 * beside `unevaluatedProperties` moves into an `allOf` entry. Ajv 8.20 forgets the properties its
 * sibling keywords evaluated when such an `if` does not match, and so refuses every field of a
 * valid body (the document's `CreateEndpointRequest` has this form); inside `allOf` it keeps them.
 * JSON Schema 2020-12 gives both forms the same meaning. Used where the harness's validators are
 * generated (openapi/generate.ts) and by the contract suite's validator.
 */
export function withAjvWorkarounds<T>(value: T): T {
  if (Array.isArray(value)) return value.map(withAjvWorkarounds) as T;
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) out[key] = withAjvWorkarounds(inner);
  if ("if" in out && "unevaluatedProperties" in out) {
    const conditional: Record<string, unknown> = {};
    for (const key of ["if", "then", "else"]) {
      if (key in out) conditional[key] = out[key];
      delete out[key];
    }
    out["allOf"] = [...((out["allOf"] as unknown[] | undefined) ?? []), conditional];
  }
  return out as T;
}
