import { z } from "zod";
import { RunletError } from "../../errors.js";
import type { CallSpec, Query } from "../transport.js";
import { validateResponse } from "../validate.js";

/** Options every client method takes. */
export interface CallOptions {
  /** Aborts the call, including any back-off wait. */
  readonly signal?: AbortSignal;
}

/** Options of list and history methods: query parameters passed as they are (filters, paging). */
export interface ListOptions extends CallOptions {
  readonly query?: Query;
}

/** Sends one v2 call (or v1, when `version` says so) and returns the parsed answer. */
export type Call = (spec: Omit<CallSpec, "version"> & { readonly version?: "v1" | "v2" }) => Promise<unknown>;

/** Encodes a path id, refusing an empty or non-string one before anything is sent. */
export function pathId(value: string, name = "id"): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new RunletError(
      "RUNLET_MANAGEMENT_INVALID",
      `${name} must be a non-empty string, got ${JSON.stringify(value)}`,
      {
        details: { field: name },
      },
    );
  }
  return encodeURIComponent(value);
}

/** Unwraps a v2 list answer `{<key>: [...]}` (docs/protocol.md, "Management API") and checks each item. */
export function unwrapList<S extends z.ZodType>(
  answer: unknown,
  key: string,
  item: S,
  what: string,
): z.output<S>[] {
  const list =
    typeof answer === "object" && answer !== null ? (answer as Record<string, unknown>)[key] : undefined;
  if (!Array.isArray(list)) {
    throw new RunletError(
      "RUNLET_MANAGEMENT_BAD_RESPONSE",
      `${what} answer has an unexpected shape: expected {"${key}": [...]}, got ${Array.isArray(answer) ? "an array" : typeof answer}`,
      { details: { issues: [{ field: key, message: "missing list wrapper" }] } },
    );
  }
  const wrapper = validateResponse(z.looseObject({ [key]: z.array(item) }), answer, what);
  return wrapper[key] as z.output<S>[];
}

/** Returns `signal` as call options, leaving the key out when it is undefined (exactOptionalPropertyTypes). */
export function withSignal(options: CallOptions | undefined): { signal?: AbortSignal } {
  return options?.signal === undefined ? {} : { signal: options.signal };
}
