import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { withAjvWorkarounds } from "../../src/harness/management-api/ajv-workarounds.js";

/**
 * The platform's published v2 document (openapi/runpod-v2.json) as a JSON Schema 2020-12 validator
 * (Ajv's 2020 build, ajv-formats), for the contract suite and the deploy tests.
 */

export type Json = Record<string, unknown>;
export const DOCUMENT = JSON.parse(
  readFileSync(new URL("../../openapi/runpod-v2.json", import.meta.url), "utf8"),
) as {
  paths: Record<string, Record<string, Json>>;
  components: { schemas: Record<string, Json> };
};
const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats.default(ajv);
// The document's own answers write templated URLs (`.../status/{job_id}`) under `format: uri`, which
// RFC 3986 (and ajv-formats) refuse; a uri here is an absolute URL once its `{name}` parts are filled.
ajv.addFormat("uri", (value: string) => URL.canParse(value.replace(/\{\w+\}/g, "x")));
ajv.addFormat("float", true);
ajv.addFormat("double", true);
// One rewrite that keeps the meaning (see withAjvWorkarounds): Ajv loses evaluated properties when a
// top-level `if` beside `unevaluatedProperties` does not match.
ajv.addSchema({ $id: "doc", components: withAjvWorkarounds(DOCUMENT.components) });

/** The document's verdict on `value` as schema `name`: [] when valid, else Ajv's messages. */
export function problemsOf(name: string, value: unknown): string[] {
  const validate = ajv.getSchema(`doc#/components/schemas/${name}`);
  if (validate === undefined) throw new Error(`no schema ${name}`);
  return validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}

/** The request examples of an operation, as [name, body]. */
export function requestExamples(path: string, method: string): [string, unknown][] {
  const body = DOCUMENT.paths[path]![method]!["requestBody"] as {
    content: { "application/json": { examples?: Record<string, { value: unknown }> } };
  };
  return Object.entries(body.content["application/json"].examples ?? {}).map(([k, v]) => [k, v.value]);
}
