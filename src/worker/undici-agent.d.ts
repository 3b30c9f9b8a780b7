// Types of the one undici module the worker imports by path (its Agent, without the package's
// index): the package ships types for its index only.
declare module "undici/lib/dispatcher/agent.js" {
  import type { Agent } from "undici";

  const AgentClass: typeof Agent;
  export default AgentClass;
}
