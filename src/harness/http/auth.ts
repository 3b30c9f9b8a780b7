import { timingSafeEqual } from "node:crypto";

/** An extra API key limited to some endpoints (to exercise 403). */
export interface ScopedKey {
  readonly key: string;
  /** Endpoint ids this key may use; every other endpoint answers 403. */
  readonly endpoints: readonly string[];
}

/** The outcome of checking a request's key. */
export type AuthResult = "ok" | "unauthorized" | "forbidden";

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * The harness's keys: the main key opens every endpoint; scoped keys open theirs. Client routes
 * take `Authorization: Bearer <key>` or the raw key (docs/protocol.md, "Authentication"); worker routes take only the
 * raw key, as the platform does (docs/protocol.md, "Headers").
 */
export class KeyRing {
  readonly #mainKey: string;
  readonly #scoped: readonly ScopedKey[];

  constructor(mainKey: string, scoped: readonly ScopedKey[] = []) {
    this.#mainKey = mainKey;
    this.#scoped = scoped;
  }

  /** Every key, for log scrubbing. */
  get secrets(): string[] {
    return [this.#mainKey, ...this.#scoped.map((s) => s.key)];
  }

  /** Checks a client route's `Authorization` header for `endpointId`. */
  client(header: string | undefined, endpointId: string): AuthResult {
    if (header === undefined || header.trim() === "") return "unauthorized";
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    return this.#check(match?.[1] ?? header.trim(), endpointId);
  }

  /** Checks a worker route's `Authorization` header (the raw key; a `Bearer` form is refused). */
  worker(header: string | undefined, endpointId: string): AuthResult {
    if (header === undefined || header === "") return "unauthorized";
    const result = this.#check(header, endpointId);
    // A worker is either let in or not: the platform answers 401 to a worker with a bad key.
    return result === "ok" ? "ok" : "unauthorized";
  }

  #check(key: string, endpointId: string): AuthResult {
    if (same(key, this.#mainKey)) return "ok";
    const scoped = this.#scoped.find((s) => same(key, s.key));
    if (scoped === undefined) return "unauthorized";
    return scoped.endpoints.includes(endpointId) ? "ok" : "forbidden";
  }
}
