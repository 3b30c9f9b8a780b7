import { z } from "zod";
import {
  type TemplateCreateInput,
  type TemplateUpdateInput,
  type TemplateV1,
  type TemplateV2,
  templateCreateSchema,
  templateUpdateSchema,
  templateV1Schema,
  templateV2Schema,
} from "../../protocol/management/template.js";
import { validateBody, validateResponse } from "../validate.js";
import { type Call, type CallOptions, type ListOptions, pathId, unwrapList, withSignal } from "./call.js";

/** `/v2/templates`: template CRUD with v2 field names (`image`, `disk`, `public`, `registry`). */
export interface TemplatesApi {
  /** `GET /v2/templates`, unwrapped from `{templates: [...]}`. */
  list(options?: ListOptions): Promise<TemplateV2[]>;
  /** `GET /v2/templates/{id}`. */
  get(id: string, options?: CallOptions): Promise<TemplateV2>;
  /** `POST /v2/templates`: `name` and `image` required. */
  create(body: TemplateCreateInput, options?: CallOptions): Promise<TemplateV2>;
  /** `PATCH /v2/templates/{id}`. */
  update(id: string, body: TemplateUpdateInput, options?: CallOptions): Promise<TemplateV2>;
  /** `DELETE /v2/templates/{id}`. */
  delete(id: string, options?: CallOptions): Promise<void>;
}

/** The three include flags of the v1 template lookup (docs/protocol.md, "v1 retirement"); each defaults to false. */
export interface GetTemplateV1Options extends CallOptions {
  /** Include templates bound to Serverless endpoints. @default false */
  readonly includeEndpointBoundTemplates?: boolean;
  /** Include community-made public templates. @default false */
  readonly includePublicTemplates?: boolean;
  /** Include the operator's official templates. @default false */
  readonly includeRunpodTemplates?: boolean;
}

export function templatesApi(call: Call): TemplatesApi {
  return {
    async list(options) {
      const answer = await call({
        method: "GET",
        path: "/templates",
        query: options?.query,
        ...withSignal(options),
      });
      return unwrapList(answer, "templates", templateV2Schema, "GET /v2/templates");
    },
    async get(id, options) {
      const answer = await call({ method: "GET", path: `/templates/${pathId(id)}`, ...withSignal(options) });
      return validateResponse(templateV2Schema, answer, "GET /v2/templates/{id}");
    },
    async create(body, options) {
      const checked = validateBody(templateCreateSchema, body, "template");
      const answer = await call({
        method: "POST",
        path: "/templates",
        body: checked,
        ...withSignal(options),
      });
      return validateResponse(templateV2Schema, answer, "POST /v2/templates");
    },
    async update(id, body, options) {
      const checked = validateBody(templateUpdateSchema, body, "template update");
      const answer = await call({
        method: "PATCH",
        path: `/templates/${pathId(id)}`,
        body: checked,
        ...withSignal(options),
      });
      return validateResponse(templateV2Schema, answer, "PATCH /v2/templates/{id}");
    },
    async delete(id, options) {
      await call({ method: "DELETE", path: `/templates/${pathId(id)}`, ...withSignal(options) });
    },
  };
}

const flagSchema = z.boolean({ error: "must be true or false" }).optional();

/**
 * `GET /v1/templates/{templateId}` (operation GetTemplate, docs/protocol.md, "v1 retirement"): the v1 Template
 * (docs/protocol.md, "Templates"), validated. Flags left out are not sent (the server's default is false).
 */
export async function getTemplateV1(
  call: Call,
  id: string,
  options: GetTemplateV1Options = {},
): Promise<TemplateV1> {
  const flags = validateBody(
    z.object({
      includeEndpointBoundTemplates: flagSchema,
      includePublicTemplates: flagSchema,
      includeRunpodTemplates: flagSchema,
    }),
    {
      includeEndpointBoundTemplates: options.includeEndpointBoundTemplates,
      includePublicTemplates: options.includePublicTemplates,
      includeRunpodTemplates: options.includeRunpodTemplates,
    },
    "template lookup options",
  );
  const answer = await call({
    version: "v1",
    method: "GET",
    path: `/templates/${pathId(id, "templateId")}`,
    query: flags,
    ...withSignal(options),
  });
  return validateResponse(templateV1Schema, answer, "GET /v1/templates/{templateId}");
}
