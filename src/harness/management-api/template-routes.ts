import { type TemplateV2, templateV2ToV1 } from "../../protocol/management/index.js";
import { invalidBody, json, type ManagementAnswer, noContent, problem, v1Error } from "./answers.js";
import { documentProblems } from "./document-schemas.js";
import type { CrudResource, RouteContext } from "./route-context.js";
import { randomId, type StoredTemplateRecord, withTemplateDefaults } from "./store.js";

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
  return json(200, v1View(stored.template));
}

/** Fields of the v2 `Template` that the v1 Template does not have. */
const V2_ONLY = ["args", "startSsh", "startJupyter", "allowedCudaVersions"];

/** A stored template as the v1 lookup answered it: v1 names, v1's own fields with their defaults. */
function v1View(template: StoredTemplateRecord): Record<string, unknown> {
  const v1: Record<string, unknown> = {
    dockerEntrypoint: [],
    dockerStartCmd: [],
    earned: 0,
    readme: "",
    runtimeInMin: 0,
    volumeInGb: 0,
    volumeMountPath: "/workspace",
    ...templateV2ToV1(template as TemplateV2),
  };
  for (const field of V2_ONLY) delete v1[field];
  return v1;
}

/**
 * `/v2/templates` and `/v2/templates/{id}`: list, create, get, update, delete. Bodies are checked
 * against the document's `CreateTemplateRequest` / `UpdateTemplateRequest` (422 with every
 * failure); answers are the document's `Template`, every required field filled.
 */
export function templateResource(context: RouteContext): CrudResource {
  const { store } = context;
  const duplicateName = (name: string | undefined, exceptId?: string): ManagementAnswer | undefined =>
    name !== undefined && store.templateNamed(name, exceptId) !== undefined
      ? problem(400, "template names must be unique", [
          `name: a template named ${JSON.stringify(name)} already exists`,
        ])
      : undefined;
  /** The caller's own template, or the answer why it may not be changed. */
  const own = (id: string): { answer: ManagementAnswer } | { template: StoredTemplateRecord } => {
    const stored = store.template(id);
    if (stored === undefined) return { answer: problem(404, `template ${id} not found`) };
    if (stored.owner !== "self") return { answer: problem(403, `template ${id} is not yours to change`) };
    return { template: stored.template };
  };

  return {
    name: "templates",
    list: () => json(200, { templates: store.ownTemplates() }),
    create(body) {
      const problems = documentProblems("CreateTemplateRequest", body);
      if (problems !== undefined) return invalidBody(problems);
      const fields = body as Readonly<Record<string, unknown>> & { name: string; image: string };
      const clash = duplicateName(fields.name);
      if (clash !== undefined) return clash;
      const template = withTemplateDefaults(randomId(10), fields);
      store.putTemplate(template);
      return json(201, template);
    },
    get(id) {
      const stored = store.template(id);
      if (stored !== undefined && (stored.owner === "self" || stored.template.public))
        return json(200, stored.template);
      return problem(404, `template ${id} not found`);
    },
    update(id, body) {
      const found = own(id);
      if ("answer" in found) return found.answer;
      const problems = documentProblems("UpdateTemplateRequest", body);
      if (problems !== undefined) return invalidBody(problems);
      const name = typeof body["name"] === "string" ? body["name"] : undefined;
      const clash = duplicateName(name, id);
      if (clash !== undefined) return clash;
      // PATCH: the fields sent replace the stored ones; `mounts: {}` leaves the mount as it is.
      const changes = { ...body };
      if (typeof changes["mounts"] === "object" && Object.keys(changes["mounts"] ?? {}).length === 0)
        delete changes["mounts"];
      const merged = { ...found.template, ...changes, id } as StoredTemplateRecord;
      store.putTemplate(merged);
      return json(200, merged);
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
