import type { z } from "zod";
import { validateBody, validateResponse } from "../validate.js";
import { type Call, type CallOptions, type ListOptions, pathId, unwrapList, withSignal } from "./call.js";

/**
 * The five calls of a v2 CRUD resource (docs/protocol.md, "Management API"): `GET /v2/<path>`
 * (unwrapped from its list wrapper), `GET`, `PATCH` and `DELETE /v2/<path>/{id}`, `POST
 * /v2/<path>`. Bodies are checked before anything is sent; answers are checked against the
 * resource's schema.
 */
export interface CrudApi<Item, Create, Update> {
  /** `GET /v2/<path>`, unwrapped from `{<listKey>: [...]}`; `query` is passed as it is (filters, paging). */
  list(options?: ListOptions): Promise<Item[]>;
  /** `GET /v2/<path>/{id}`. */
  get(id: string, options?: CallOptions): Promise<Item>;
  /** `POST /v2/<path>`. */
  create(body: Create, options?: CallOptions): Promise<Item>;
  /** `PATCH /v2/<path>/{id}`. */
  update(id: string, body: Update, options?: CallOptions): Promise<Item>;
  /** `DELETE /v2/<path>/{id}`. */
  delete(id: string, options?: CallOptions): Promise<void>;
}

/** One resource, described once: where it lives, its list wrapper, and the schemas of its item and bodies. */
export interface ResourceDescription<I extends z.ZodType, C extends z.ZodType, U extends z.ZodType> {
  /** Its path under `/v2`: `"/templates"`. */
  readonly path: string;
  /** The key of the list answer's wrapper: `"templates"`; undefined when the list is answered as it comes. */
  readonly listKey?: string;
  /** The item every answer is checked against. */
  readonly item: I;
  /** What a bad body's error calls it: `"template"` (its update is `"template update"`). */
  readonly name: string;
  readonly create: C;
  readonly update: U;
}

/** The CRUD calls of a described resource. */
export function crudApi<I extends z.ZodType, C extends z.ZodType, U extends z.ZodType>(
  call: Call,
  resource: ResourceDescription<I, C, U>,
): CrudApi<z.output<I>, z.input<C>, z.input<U>> {
  const { path, item, name } = resource;
  const one = (id: string) => `${path}/${pathId(id)}`;
  return {
    async list(options) {
      const answer = await call({ method: "GET", path, query: options?.query, ...withSignal(options) });
      const what = `GET /v2${path}`;
      // Without a wrapper key (an answer shape the spec does not show) the list comes as it is.
      return resource.listKey === undefined
        ? (answer as z.output<I>[])
        : unwrapList(answer, resource.listKey, item, what);
    },
    async get(id, options) {
      const answer = await call({ method: "GET", path: one(id), ...withSignal(options) });
      return validateResponse(item, answer, `GET /v2${path}/{id}`);
    },
    async create(body, options) {
      const checked = validateBody(resource.create, body, name);
      const answer = await call({ method: "POST", path, body: checked, ...withSignal(options) });
      return validateResponse(item, answer, `POST /v2${path}`);
    },
    async update(id, body, options) {
      const checked = validateBody(resource.update, body, `${name} update`);
      const answer = await call({ method: "PATCH", path: one(id), body: checked, ...withSignal(options) });
      return validateResponse(item, answer, `PATCH /v2${path}/{id}`);
    },
    async delete(id, options) {
      await call({ method: "DELETE", path: one(id), ...withSignal(options) });
    },
  };
}
