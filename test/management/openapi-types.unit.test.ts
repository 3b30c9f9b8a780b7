import { describe, expect, it } from "vitest";
import type {
  NetworkVolumeCreateInput,
  RegistryCreateInput,
  ServerlessCreateInput,
  ServerlessUpdateInput,
  TemplateCreateInput,
  TemplateUpdateInput,
} from "../../src/management/index.js";
import type { components } from "../../src/protocol/management/generated/openapi-types.js";

/**
 * The client's body types (inferred from its hand-kept zod schemas) checked, by the compiler,
 * against the types `openapi-typescript` generated from the published document: every body the
 * client accepts has the document's request type. `npm run typecheck` fails when they part.
 */

type Schemas = components["schemas"];

/** `T` with `undefined` taken out of its optional fields, deeply (zod writes `?: X | undefined`). */
type Defined<T> = T extends readonly (infer I)[]
  ? Defined<I>[]
  : T extends object
    ? { [K in keyof T]: Defined<Exclude<T[K], undefined>> }
    : T;

/** Compiles only when `A` is assignable to `B`. */
type Assignable<A, B> = [A] extends [B] ? true : false;

const checks: Record<string, true> = {
  CreateEndpointRequest: true satisfies Assignable<
    Defined<ServerlessCreateInput>,
    Schemas["CreateEndpointRequest"]
  >,
  UpdateEndpointRequest: true satisfies Assignable<
    Defined<ServerlessUpdateInput>,
    Schemas["UpdateEndpointRequest"]
  >,
  CreateTemplateRequest: true satisfies Assignable<
    Defined<TemplateCreateInput>,
    Schemas["CreateTemplateRequest"]
  >,
  UpdateTemplateRequest: true satisfies Assignable<
    Defined<TemplateUpdateInput>,
    Schemas["UpdateTemplateRequest"]
  >,
  CreateNetworkVolumeRequest: true satisfies Assignable<
    Defined<NetworkVolumeCreateInput>,
    Schemas["CreateNetworkVolumeRequest"]
  >,
  CreateRegistryRequest: true satisfies Assignable<
    Defined<RegistryCreateInput>,
    Schemas["CreateRegistryRequest"]
  >,
};

describe("the client's body types against the generated document types", () => {
  it("each request body type is assignable to the document's (checked by tsc; listed here)", () => {
    expect(Object.keys(checks)).toHaveLength(6);
  });
});
