#!/usr/bin/env node
// The CLI runs from TypeScript sources: tsx's loader lets Node import them (and users' .ts handlers).
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
