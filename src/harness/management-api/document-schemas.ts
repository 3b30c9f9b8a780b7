import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { OPENAPI_SCHEMAS } from "../../protocol/management/generated/openapi-schemas.js";

/**
 * The harness's request validation, from the platform's published v2 document itself
 * (openapi/runpod-v2.json, via the generated src/protocol/management/generated/openapi-schemas.ts)
 * rather than from the client's own zod schemas, so the two are checked against each other instead
 * of agreeing by construction. JSON Schema 2020-12 (Ajv's 2020 build), as the document's
 * `openapi: 3.1.0` says. `format` is not checked: the request schemas use only `float` and
 * `double`, which name a number's width, not a constraint.
 */

/** Where the component schemas live, for `$ref`s of the form `#/components/schemas/X`. */
const DOCUMENT_ID = "https://runlet.invalid/runpod-v2.json";

/**
 * The schemas with one rewrite that does not change what they accept: an `if`/`then` beside
 * `unevaluatedProperties` moves into an `allOf` entry. Ajv 8.20 forgets the properties its sibling
 * keywords evaluated when such an `if` does not match, and so refuses every field of a valid body
 * (the document's `CreateEndpointRequest` has this form); inside `allOf` it keeps them. JSON Schema
 * 2020-12 gives both forms the same meaning.
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

let ajv: Ajv2020 | undefined;
const compiled = new Map<string, ValidateFunction>();

function validatorOf(schemaName: string): ValidateFunction {
  const known = compiled.get(schemaName);
  if (known !== undefined) return known;
  if (ajv === undefined) {
    ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
    ajv.addSchema({ $id: DOCUMENT_ID, components: { schemas: withAjvWorkarounds(OPENAPI_SCHEMAS) } });
  }
  if (!(schemaName in OPENAPI_SCHEMAS)) throw new Error(`the v2 document has no schema ${schemaName}`);
  const fn = ajv.compile({ $ref: `${DOCUMENT_ID}#/components/schemas/${schemaName}` });
  compiled.set(schemaName, fn);
  return fn;
}

/** `$.gpu.pools[0]` from Ajv's `/gpu/pools/0`. */
function pathOf(instancePath: string): string {
  let out = "$";
  for (const part of instancePath.split("/").slice(1)) {
    const key = part.replaceAll("~1", "/").replaceAll("~0", "~");
    out += /^\d+$/.test(key) ? `[${key}]` : `.${key}`;
  }
  return out;
}

/** One Ajv error as the v2 problem's `errors` entries read: `$.field: what is wrong`. */
function messageOf(error: ErrorObject): string {
  const at = pathOf(error.instancePath);
  const params = error.params as Record<string, unknown>;
  if (error.keyword === "unevaluatedProperties" || error.keyword === "additionalProperties") {
    const name = params["unevaluatedProperty"] ?? params["additionalProperty"];
    return `${at}: additional properties '${String(name)}' not allowed`;
  }
  return `${at}: ${error.message ?? error.keyword}`;
}

/** Branch errors of `oneOf`/`anyOf`/`if` only repeat the ones below them. */
const SUMMARY_KEYWORDS = new Set(["oneOf", "anyOf", "if", "allOf"]);

/**
 * Validates `body` against the document's component schema `schemaName`
 * (`CreateEndpointRequest`, ...): undefined when it is valid, else every failure as
 * `$.field: message` (each once).
 */
export function documentProblems(schemaName: string, body: unknown): string[] | undefined {
  const validate = validatorOf(schemaName);
  if (validate(body)) return undefined;
  const errors = validate.errors ?? [];
  const specific = errors.filter((e) => !SUMMARY_KEYWORDS.has(e.keyword));
  return [...new Set((specific.length > 0 ? specific : errors).map(messageOf))];
}
