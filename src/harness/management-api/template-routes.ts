import {
  issueMessages,
  type TemplateV1,
  templateCreateSchema,
  templateUpdateSchema,
  templateV1ToV2,
  templateV2ToV1,
} from "../../protocol/management/index.js";
import { json, type ManagementAnswer, noContent, problem, v1Error } from "./answers.js";
import type { CrudResource, RouteContext } from "./route-context.js";
import { randomId, withTemplateDefaults } from "./store.js";

/** What a template id must look like; anything else is the v1 lookup's 400 "invalid id". */
const TEMPLATE_ID = /^[A-Za-z0-9_-]{1,64}$/;
const FLAGS = ["includeEndpointBoundTemplates", "includePublicTemplates", "includeRunpodTemplates"] as const;

/**
 * `GET /v1/templates/{templateId}` (docs/protocol.md, "v1 retirement"). A template is found when it is the
 * caller's and not bound to an endpoint, or when the flag for its kind is true: bound to an
 * endpoint (`includeEndpointBoundTemplates`), community-public (`includePublicTemplates`), the
 * operator's (`includeRunpodTemplates`). Otherwise 404, as for an unknown id.
 */
export function v1TemplateLookup(
  context: RouteContext,
  id: string,
  query: URLSearchParams,
): ManagementAnswer {
  if (!TEMPLATE_ID.test(id)) return v1Error(400, `invalid template id ${JSON.stringify(id)}`);
  const flags: Record<(typeof FLAGS)[number], boolean> = {
    includeEndpointBoundTemplates: false,
    includePublicTemplates: false,
    includeRunpodTemplates: false,
  };
  for (const flag of FLAGS) {
    const raw = query.get(flag);
    if (raw === null) continue;
    if (raw !== "true" && raw !== "false")
      return v1Error(400, `${flag} must be true or false, got ${JSON.stringify(raw)}`);
    flags[flag] = raw === "true";
  }
  const stored = context.store.template(id);
  const notFound = v1Error(404, `template ${id} not found`);
  if (stored === undefined) return notFound;
  if (stored.owner === "runpod" && !flags.includeRunpodTemplates) return notFound;
  if (stored.owner === "community" && !flags.includePublicTemplates) return notFound;
  if (
    stored.owner === "self" &&
    context.store.endpointsUsing(id).length > 0 &&
    !flags.includeEndpointBoundTemplates
  ) {
    return notFound;
  }
  return json(200, stored.template);
}

/** `/v2/templates` and `/v2/templates/{id}`: list, create, get, update, delete in v2 field names. */
export function templateResource(context: RouteContext): CrudResource {
  const { store } = context;
  const duplicateName = (name: string | undefined, exceptId?: string): ManagementAnswer | undefined =>
    name !== undefined && store.templateNamed(name, exceptId) !== undefined
      ? problem(400, "template names must be unique", [
          `name: a template named ${JSON.stringify(name)} already exists`,
        ])
      : undefined;
  /** The caller's own template, or the answer why it may not be changed. */
  const own = (id: string): { answer: ManagementAnswer } | { template: TemplateV1 } => {
    const stored = store.template(id);
    if (stored === undefined) return { answer: problem(404, `template ${id} not found`) };
    if (stored.owner !== "self") return { answer: problem(403, `template ${id} is not yours to change`) };
    return { template: stored.template };
  };

  return {
    name: "templates",
    list: () => json(200, { templates: store.ownTemplates().map(templateV1ToV2) }),
    create(body) {
      const parsed = templateCreateSchema.safeParse(body);
      if (!parsed.success) return problem(400, "the template is invalid", issueMessages(parsed.error));
      const clash = duplicateName(parsed.data.name);
      if (clash !== undefined) return clash;
      const v1 = templateV2ToV1({ ...parsed.data, id: "" });
      const template = withTemplateDefaults(randomId(10), v1 as TemplateV1);
      store.putTemplate(template);
      return json(201, templateV1ToV2(template));
    },
    get(id) {
      const stored = store.template(id);
      if (stored !== undefined && (stored.owner === "self" || stored.template.isPublic === true))
        return json(200, templateV1ToV2(stored.template));
      return problem(404, `template ${id} not found`);
    },
    update(id, body) {
      const found = own(id);
      if ("answer" in found) return found.answer;
      const parsed = templateUpdateSchema.safeParse(body);
      if (!parsed.success) return problem(400, "the template update is invalid", issueMessages(parsed.error));
      const clash = duplicateName(parsed.data.name, id);
      if (clash !== undefined) return clash;
      const current = templateV1ToV2(found.template);
      // Keys the update leaves out (undefined after parsing) keep the stored values.
      const changes = Object.fromEntries(Object.entries(parsed.data).filter(([, v]) => v !== undefined));
      const merged = templateV2ToV1({ ...current, ...changes, id });
      store.putTemplate(merged);
      return json(200, templateV1ToV2(merged));
    },
    remove(id) {
      const found = own(id);
      if ("answer" in found) return found.answer;
      const users = store.endpointsUsing(id);
      if (users.length > 0) {
        return problem(
          400,
          `template ${id} is used by endpoint(s) ${users.join(", ")}; delete or move them first`,
        );
      }
      store.deleteTemplate(id);
      return noContent();
    },
    below: (id, rest) => problem(404, `no such path /v2/templates/${id}/${rest}`),
  };
}
