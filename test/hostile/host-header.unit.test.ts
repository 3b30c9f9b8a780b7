import { describe, expect, it } from "vitest";
import { allowedHostsFlag } from "../../src/cli/command.js";
import type { Harness } from "../../src/harness/index.js";
import { inMemoryHarness } from "../support/inject.js";
import { send } from "../support/raw-http.js";

// Issue 32, item 8: against DNS rebinding (a page whose own name is pointed at 127.0.0.1), the
// harness and the dashboard answer only IP addresses, localhost and the names they are given.
// The check reads the request's Host header, whatever carried it: the requests go to the
// listeners' connections in memory (Harness.connect, connectDashboard), each naming its Host.

/** `/health` of the API listener, in memory, naming `host`. */
const health = (h: Harness, host: string) =>
  send(h.url, {
    path: "/v2/local/health",
    headers: { host, authorization: h.apiKey },
    connect: () => h.connect(),
  });

describe("the Host header check (issue 32)", () => {
  it("refuses other names with 403 on the harness and the dashboard, and answers IPs, localhost and the bound host", async () => {
    await using h = inMemoryHarness({ dashboard: true });
    const api = { base: "api", path: "/v2/local/health", connect: () => h.connect() };
    const page = { base: "dashboard", path: "/_runlet/", connect: () => h.connectDashboard() };
    // Any port: the check compares names.
    const port = 8000;
    for (const { base, path, connect } of [api, page]) {
      const ask = (host: string) =>
        send(h.url, { path, headers: { host, authorization: h.apiKey }, connect });
      const evil = await ask(`rebind.attacker.example:${port}`);
      expect({ base, status: evil.status }).toEqual({ base, status: 403 });
      expect(evil.text).toContain('Host \\"rebind.attacker.example:');
      expect(evil.text).toContain("allowedHosts");
      for (const host of [
        `127.0.0.1:${port}`,
        `localhost:${port}`,
        `[::1]:${port}`,
        "app.localhost",
        "10.0.0.5",
      ]) {
        const res = await ask(host);
        expect({ base, host, status: res.status }).toEqual({ base, host, status: 200 });
      }
    }
  });

  it("answers the names in allowedHosts (a leading dot for a domain), and any name with true", async () => {
    {
      await using h = inMemoryHarness({ allowedHosts: ["dev.example", ".corp.example"] });
      const status = async (host: string) => (await health(h, host)).status;
      expect(await status("dev.example")).toBe(200);
      expect(await status("a.b.corp.example:80")).toBe(200);
      expect(await status("corp.example")).toBe(200);
      expect(await status("notcorp.example")).toBe(403);
    }
    {
      await using h = inMemoryHarness({ allowedHosts: true });
      expect((await health(h, "anything.example")).status).toBe(200);
    }
    expect(() => inMemoryHarness({ allowedHosts: ["bad name"] })).toThrow(
      "allowedHosts must hold host names",
    );
  });

  it("reads --allowed-hosts, else RUNLET_ALLOWED_HOSTS", () => {
    expect(allowedHostsFlag(undefined, {})).toBeUndefined();
    expect(allowedHostsFlag("a.example, .b.example", {})).toEqual(["a.example", ".b.example"]);
    expect(allowedHostsFlag(undefined, { RUNLET_ALLOWED_HOSTS: "all" })).toBe(true);
    expect(allowedHostsFlag("x.example", { RUNLET_ALLOWED_HOSTS: "all" })).toEqual(["x.example"]);
    expect(() => allowedHostsFlag("a b", {})).toThrow("--allowed-hosts must be comma-separated host names");
  });
});
