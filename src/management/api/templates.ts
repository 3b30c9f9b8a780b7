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
import { type Call, type CallOptions, pathId, withSignal } from "./call.js";
import { type CrudApi, crudApi } from "./resource.js";

/** `/v2/templates`: template CRUD with v2 field names (`image`, `disk`, `public`, `registry`); `create` needs `name` and `image`. */
export interface TemplatesApi extends CrudApi<TemplateV2, TemplateCreateInput, TemplateUpdateInput> {}

/** The templates resource, described once. */
export const TEMPLATES = {
  path: "/templates",
  listKey: "templates",
  item: templateV2Schema,
  name: "template",
  create: templateCreateSchema,
  update: templateUpdateSchema,
} as const;

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
  return crudApi(call, TEMPLATES);
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
