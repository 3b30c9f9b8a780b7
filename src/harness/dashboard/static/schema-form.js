// The "run a request" form's view of a handler's input schema (JSON Schema, as zod 4 writes it):
// a valid example to start from, the fields with their types, and the errors of an edited input.
// Covers the keywords zod emits; anything else is accepted, since the handler checks again.

/** Deeper schemas than this are not followed (a recursive schema must not hang the page). */
const MAX_DEPTH = 24;
/** At most this many errors are listed. */
const MAX_ERRORS = 20;

/** Follows a local `$ref` ("#/$defs/Name" or "#"); anything else stays as it is. */
function resolve(schema, root) {
  let s = schema;
  for (let hops = 0; s && typeof s.$ref === "string" && hops < MAX_DEPTH; hops++) {
    if (s.$ref === "#") s = root;
    else if (s.$ref.startsWith("#/")) {
      let target = root;
      for (const part of s.$ref.slice(2).split("/"))
        target = target?.[part.replaceAll("~1", "/").replaceAll("~0", "~")];
      s = target;
    } else return {};
  }
  return s && typeof s === "object" ? s : {};
}

const typesOf = (s) => (Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type]);

/** A value the schema accepts, as far as one can be made: defaults, then required fields with a placeholder of their type. */
export function exampleOf(schema, root = schema, depth = 0) {
  const s = resolve(schema, root);
  if (depth > MAX_DEPTH) return null;
  if ("default" in s) return s.default;
  if ("const" in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if (Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0];
  const options = s.anyOf ?? s.oneOf;
  if (Array.isArray(options) && options.length > 0) {
    // A nullable field (`x | null`) starts from its non-null side.
    const first = options.find((o) => !typesOf(resolve(o, root)).includes("null")) ?? options[0];
    return exampleOf(first, root, depth + 1);
  }
  if (Array.isArray(s.allOf) && s.allOf.length > 0) return exampleOf(s.allOf[0], root, depth + 1);
  const type = typesOf(s).find((t) => t !== "null") ?? (s.properties ? "object" : undefined);
  switch (type) {
    case "object": {
      const out = {};
      const required = new Set(s.required ?? []);
      for (const [name, prop] of Object.entries(s.properties ?? {})) {
        const p = resolve(prop, root);
        if (required.has(name) || "default" in p) out[name] = exampleOf(p, root, depth + 1);
      }
      return out;
    }
    case "array": {
      const count = Math.min(s.minItems ?? 0, 3);
      return Array.from({ length: count }, (_, i) =>
        exampleOf(s.prefixItems?.[i] ?? s.items ?? {}, root, depth + 1),
      );
    }
    case "string":
      // Long enough to pass a minimum length (a pattern or format the person fills in).
      return "x".repeat(Math.min(s.minLength ?? 0, 64));
    case "integer":
    case "number":
      return typeof s.minimum === "number" && s.minimum > 0 ? s.minimum : 0;
    case "boolean":
      return false;
    case "null":
      return null;
    default:
      return {};
  }
}

/** The top-level fields: name, type, required, default and description, for the form's legend. */
export function fieldsOf(schema) {
  const s = resolve(schema, schema);
  const required = new Set(s.required ?? []);
  return Object.entries(s.properties ?? {}).map(([name, prop]) => {
    const p = resolve(prop, schema);
    const options = p.anyOf ?? p.oneOf;
    const type = Array.isArray(p.enum)
      ? p.enum.map((v) => JSON.stringify(v)).join(" | ")
      : Array.isArray(options)
        ? options.map((o) => typesOf(resolve(o, schema)).join(" | ") || "…").join(" | ")
        : typesOf(p).join(" | ") || "any";
    return {
      name,
      type,
      required: required.has(name),
      ...("default" in p ? { default: p.default } : {}),
      ...(typeof p.description === "string" ? { description: p.description } : {}),
    };
  });
}

function jsonType(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (Number.isInteger(value)) return "integer";
  return typeof value;
}

const at = (path) => (path === "" ? "input" : `input${path}`);

/** The ways `value` breaks `schema`, each `{path, message}` (path like `.text` or `[2]`); empty when it fits. */
export function validate(schema, value) {
  const errors = [];
  check(schema, value, "", schema, 0, errors);
  return errors.slice(0, MAX_ERRORS);
}

function check(schema, value, path, root, depth, errors) {
  if (errors.length >= MAX_ERRORS || depth > MAX_DEPTH) return;
  const s = resolve(schema, root);
  const fail = (message) => errors.push({ path: at(path), message });
  for (const part of s.allOf ?? []) check(part, value, path, root, depth + 1, errors);
  const options = s.anyOf ?? s.oneOf;
  if (Array.isArray(options) && options.length > 0) {
    const fits = options.some((o) => {
      const found = [];
      check(o, value, path, root, depth + 1, found);
      return found.length === 0;
    });
    if (!fits) fail(`matches none of the ${options.length} allowed shapes`);
    return;
  }
  if ("const" in s && JSON.stringify(s.const) !== JSON.stringify(value)) {
    return fail(`must be ${JSON.stringify(s.const)}`);
  }
  if (Array.isArray(s.enum) && !s.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
    return fail(`must be one of ${s.enum.map((v) => JSON.stringify(v)).join(", ")}`);
  }
  const types = typesOf(s);
  const actual = jsonType(value);
  if (types.length > 0 && !types.some((t) => t === actual || (t === "number" && actual === "integer"))) {
    return fail(`expected ${types.join(" or ")}, got ${actual}`);
  }
  if (actual === "string") {
    if (typeof s.minLength === "number" && value.length < s.minLength)
      fail(`must be at least ${s.minLength} character${s.minLength === 1 ? "" : "s"}`);
    if (typeof s.maxLength === "number" && value.length > s.maxLength)
      fail(`must be at most ${s.maxLength} characters`);
    if (typeof s.pattern === "string") {
      try {
        if (!new RegExp(s.pattern, "u").test(value)) fail(`must match /${s.pattern}/`);
      } catch {
        // A pattern JavaScript cannot read: the handler checks it.
      }
    }
  }
  if (actual === "number" || actual === "integer") {
    if (typeof s.minimum === "number" && value < s.minimum) fail(`must be at least ${s.minimum}`);
    if (typeof s.maximum === "number" && value > s.maximum) fail(`must be at most ${s.maximum}`);
    if (typeof s.exclusiveMinimum === "number" && value <= s.exclusiveMinimum)
      fail(`must be more than ${s.exclusiveMinimum}`);
    if (typeof s.exclusiveMaximum === "number" && value >= s.exclusiveMaximum)
      fail(`must be less than ${s.exclusiveMaximum}`);
  }
  if (actual === "array") {
    if (typeof s.minItems === "number" && value.length < s.minItems)
      fail(`needs at least ${s.minItems} items`);
    if (typeof s.maxItems === "number" && value.length > s.maxItems)
      fail(`takes at most ${s.maxItems} items`);
    value.forEach((item, i) => {
      const itemSchema = s.prefixItems?.[i] ?? s.items;
      if (itemSchema !== undefined && itemSchema !== true)
        check(itemSchema, item, `${path}[${i}]`, root, depth + 1, errors);
    });
  }
  if (actual === "object") {
    for (const name of s.required ?? []) {
      if (!(name in value)) errors.push({ path: at(`${path}.${name}`), message: "is required" });
    }
    const props = s.properties ?? {};
    for (const [name, v] of Object.entries(value)) {
      if (name in props) check(props[name], v, `${path}.${name}`, root, depth + 1, errors);
      else if (s.additionalProperties === false) fail(`has an unknown field "${name}"`);
      else if (typeof s.additionalProperties === "object")
        check(s.additionalProperties, v, `${path}.${name}`, root, depth + 1, errors);
    }
  }
}
