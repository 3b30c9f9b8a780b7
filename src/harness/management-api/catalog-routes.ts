import { json, type ManagementAnswer, problem } from "./answers.js";
import { CATALOG_CPUS, CATALOG_DATA_CENTERS, CATALOG_GPUS } from "./catalog-table.js";

const TABLES = {
  gpus: { key: "gpus", rows: CATALOG_GPUS, what: "GPU type" },
  cpus: { key: "cpus", rows: CATALOG_CPUS, what: "CPU type" },
  datacenters: { key: "dataCenters", rows: CATALOG_DATA_CENTERS, what: "data center" },
} as const;

/**
 * `GET /v2/catalog/{gpus,cpus,datacenters}[/{id}]` from the harness's fixed table
 * (catalog-table.ts), in the document's list shapes (`{gpus: [...]}`, ...). Query filters are not
 * applied. `/v2/catalog/templates` and anything else below answers 501.
 */
export function catalogAnswer(rest: string): ManagementAnswer {
  const [kind, id, ...more] = rest.split("/");
  const table = TABLES[kind as keyof typeof TABLES];
  if (table === undefined || more.length > 0)
    return problem(
      501,
      `the harness does not emulate /v2/catalog/${rest}; it serves gpus, cpus and datacenters`,
    );
  if (id === undefined || id === "") return json(200, { [table.key]: table.rows });
  const row = (table.rows as readonly { id: string }[]).find((r) => r.id === id);
  return row === undefined ? problem(404, `${table.what} ${id} not found`) : json(200, row);
}
