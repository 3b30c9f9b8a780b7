// Types of schema-form.js, which the page loads as it is and runlet dev's banner imports too.

/** A value `schema` (JSON Schema) accepts, as far as one can be made: defaults, then required fields with a placeholder. */
export function exampleOf(schema: unknown): unknown;

/** The top-level fields of `schema`, for a form's legend. */
export function fieldsOf(schema: unknown): Array<{
  name: string;
  type: string;
  required: boolean;
  default?: unknown;
  description?: string;
}>;

/** The ways `value` breaks `schema`, each with its path (`input.text`) and what is wrong; empty when it fits. */
export function validate(schema: unknown, value: unknown): Array<{ path: string; message: string }>;
