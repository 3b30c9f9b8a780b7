import { invalidBody, json, type ManagementAnswer, noContent, problem } from "./answers.js";
import { documentProblems } from "./document-schemas.js";
import type { CrudResource, RouteContext } from "./route-context.js";
import { randomId } from "./store.js";

type Body = Readonly<Record<string, unknown>>;

/** Most network volumes, and most registry credentials, the copy keeps; a create past it is a 400. */
export const MAX_STORAGE_RECORDS = 1_000;

/**
 * `/v2/network-volumes` and `/v2/network-volumes/{id}` (the document's `NetworkVolume`): create
 * (`type` STANDARD unless given), list, get, PATCH (`size` may only grow, as the document says),
 * DELETE. Nothing is provisioned: a volume here is a record a deploy can name.
 */
export function networkVolumesResource(): CrudResource {
  const volumes = new Map<string, Record<string, unknown>>();
  const notFound = (id: string) => problem(404, `network volume ${id} not found`);
  return {
    name: "network-volumes",
    list: () => json(200, { networkVolumes: [...volumes.values()] }),
    create(body) {
      const problems = documentProblems("CreateNetworkVolumeRequest", body);
      if (problems !== undefined) return invalidBody(problems);
      if (volumes.size >= MAX_STORAGE_RECORDS)
        return problem(400, `the harness keeps at most ${MAX_STORAGE_RECORDS} network volumes`);
      const volume = { id: randomId(10), type: "STANDARD", ...body };
      volumes.set(volume.id, volume);
      return json(201, volume);
    },
    get: (id) => (volumes.has(id) ? json(200, volumes.get(id)) : notFound(id)),
    update(id, body) {
      const current = volumes.get(id);
      if (current === undefined) return notFound(id);
      const problems = documentProblems("UpdateNetworkVolumeRequest", body);
      if (problems !== undefined) return invalidBody(problems);
      const size = body["size"];
      if (typeof size === "number" && size < (current["size"] as number))
        return problem(400, "the network volume update is invalid", [
          `$.size: a network volume only grows (${current["size"]} GB now, ${size} asked)`,
        ]);
      const next = { ...current, ...body };
      volumes.set(id, next);
      return json(200, next);
    },
    remove: (id) => (volumes.delete(id) ? noContent() : notFound(id)),
    below: (id, rest) => problem(404, `no such path /v2/network-volumes/${id}/${rest}`),
  };
}

/**
 * `/v2/registries` and `/v2/registries/{id}` (the document's `Registry`): create, list, get,
 * DELETE; no update. Credentials are write-only: answers carry `id` and `name`, never the username
 * or password, which the copy does not keep. Deleting one sets `registry` to null on the templates
 * that named it, as the document says. Delegations answer 501.
 */
export function registriesResource(context: RouteContext): CrudResource {
  const registries = new Map<string, { id: string; name: string }>();
  const notFound = (id: string) => problem(404, `registry ${id} not found`);
  const delegations = (): ManagementAnswer =>
    problem(501, "the harness does not emulate /v2/registries/delegations");
  return {
    name: "registries",
    list: () => json(200, { registries: [...registries.values()] }),
    create(body: Body) {
      const problems = documentProblems("CreateRegistryRequest", body);
      if (problems !== undefined) return invalidBody(problems);
      if (registries.size >= MAX_STORAGE_RECORDS)
        return problem(400, `the harness keeps at most ${MAX_STORAGE_RECORDS} registry credentials`);
      const registry = { id: randomId(10), name: body["name"] as string };
      registries.set(registry.id, registry);
      return json(201, registry);
    },
    get: (id) =>
      id === "delegations"
        ? delegations()
        : registries.has(id)
          ? json(200, registries.get(id))
          : notFound(id),
    update: (id) =>
      id === "delegations" ? delegations() : problem(405, "PATCH is not allowed on /v2/registries/{id}"),
    remove(id) {
      if (id === "delegations") return delegations();
      if (!registries.delete(id)) return notFound(id);
      for (const template of context.store.ownTemplates())
        if (template.registry === id) context.store.putTemplate({ ...template, registry: null });
      return noContent();
    },
    below: (id, rest) =>
      id === "delegations" ? delegations() : problem(404, `no such path /v2/registries/${id}/${rest}`),
  };
}
