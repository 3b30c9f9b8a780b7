// The harness's live page: plain DOM, no build step, no dependency. Data comes from the
// dashboard's own routes (api/…) with the harness's key; live changes from its event feed.

import { openAIReplyOf, openAIRouteOf } from "./openai-reply.js";
import { exampleOf, fieldsOf, validate } from "./schema-form.js";

const TOKEN_KEY = "runlet-dashboard-token";
const MAX_JOBS = 500;
const TERMINAL = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"]);

const $ = (id) => document.getElementById(id);

const state = {
  endpoints: new Map(),
  /** endpointId → worker views */
  workers: new Map(),
  /** jobId → row */
  jobs: new Map(),
  filter: "",
  /** The open job's id, and its detail once loaded. */
  openId: null,
  open: null,
  /** Detail reads in flight, and the open job's events that arrived meanwhile. */
  loading: 0,
  pending: [],
  editorTouched: false,
  /** endpointId → what its handler takes (input JSON Schema) and does (streams, OpenAI). */
  handlers: new Map(),
  /** test_input.json, when the harness was given one: the form starts from it rather than the schema. */
  sample: undefined,
};

// ---- the key: from the link's #token=…, kept for this browser session only ----

function takeTokenFromLink() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    // The key leaves the address bar (and history) at once.
    history.replaceState(null, "", location.pathname + location.search);
  }
}

const token = () => sessionStorage.getItem(TOKEN_KEY);

function lock(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  $("app").hidden = true;
  $("locked").hidden = false;
  $("key-error").textContent = message ?? "";
  setConn("offline", "locked");
}

function unlock() {
  $("locked").hidden = true;
  $("app").hidden = false;
}

// ---- tiny DOM helper ----

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const json = (value) => JSON.stringify(value, null, 2) ?? "undefined";
const ms = (n) => (n === undefined ? "–" : `${n} ms`);
const clock = (iso) => (iso === undefined ? "–" : new Date(iso).toLocaleTimeString());
const statusBadge = (status) => h("span", { class: "status", "data-status": status }, status);

// ---- the data routes ----

async function api(method, path, body) {
  const res = await fetch(`api/${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token()}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const data = await res.json().catch(() => ({}));
  if (res.status === 401) {
    lock("That key was refused.");
    throw new Error("the harness refused the key");
  }
  if (!res.ok) {
    // A refused body names each problem on a line of its own.
    const issues = Array.isArray(data.issues) ? data.issues.map((i) => `\n  ${i}`).join("") : "";
    throw new Error(`${data.error ?? `HTTP ${res.status}`}${issues}`);
  }
  return data;
}

// ---- the event feed (server-sent events read through fetch, so the key stays in a header) ----

function setConn(state, text) {
  const el = $("conn");
  el.dataset.state = state;
  el.textContent = text ?? state;
}

/** The live feed's last failure, shown beside "reconnecting…". */
let lastFeedError;

async function follow() {
  for (;;) {
    if (!token()) return;
    try {
      setConn("connecting", "connecting…");
      const res = await fetch("api/events", { headers: { authorization: `Bearer ${token()}` } });
      if (res.status === 401) {
        lock("That key was refused.");
        return;
      }
      if (!res.ok || res.body === null) throw new Error(`HTTP ${res.status}`);
      unlock();
      setConn("live", "live");
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end = buffer.indexOf("\n\n");
        while (end >= 0) {
          dispatch(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf("\n\n");
        }
      }
    } catch (err) {
      // Shown on the page, where the person watching looks; the page has no logger.
      lastFeedError = err instanceof Error ? err.message : String(err);
    }
    setConn("offline", lastFeedError === undefined ? "reconnecting…" : `reconnecting… (${lastFeedError})`);
    lastFeedError = undefined;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function dispatch(block) {
  let type = "message";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) type = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (data !== "") onEvent(type, JSON.parse(data));
}

function onEvent(type, data) {
  switch (type) {
    case "snapshot":
      state.endpoints = new Map(data.endpoints.map((e) => [e.id, e]));
      state.workers = new Map(data.endpoints.map((e) => [e.id, []]));
      for (const w of data.workers) state.workers.get(w.endpointId)?.push(w);
      state.jobs = new Map(data.jobs.map((j) => [j.id, j]));
      state.handlers = new Map(Object.entries(data.handlers ?? {}));
      state.sample = data.sampleRequest;
      renderEndpoints();
      renderWorkers();
      renderJobs();
      fillEditor();
      if (state.openId !== null) loadJob(state.openId);
      return;
    case "handler":
      state.handlers.set(data.endpointId, data.info);
      if (data.endpointId === $("run-endpoint").value) fillEditor();
      return;
    case "metrics":
      if (data.jobId !== state.openId || state.open === null) return;
      state.open.metrics = data.metrics;
      renderMetrics();
      return;
    case "endpoint":
      state.endpoints.set(data.endpoint.id, data.endpoint);
      state.workers.set(data.endpoint.id, data.workers);
      renderEndpoints();
      renderWorkers();
      return;
    case "job": {
      if (data.deleted) {
        // Deleted (ttl, retention, purge): gone from the list; an open view says so.
        state.jobs.delete(data.id);
        renderJobs();
        if (data.id === state.openId)
          $("job-error").textContent = "this job has been deleted (ttl, retention or purge)";
        return;
      }
      const before = state.jobs.get(data.id);
      state.jobs.set(data.id, data);
      trimJobs();
      renderJobs();
      if (data.id === state.openId && before?.status !== data.status) loadJob(data.id);
      return;
    }
    case "progress":
    case "stream":
      if (data.jobId !== state.openId) return;
      // While the open job's detail is being read, its events are kept and replayed on it: the
      // detail may or may not hold them, and the index tells which.
      if (state.loading > 0) state.pending.push({ type, data });
      if (state.open !== null) applyToOpen(type, data);
      return;
  }
}

/** Adds the open job's next progress update or stream chunk; `index` (from 1) skips what it holds. */
function applyToOpen(type, data) {
  const list = type === "progress" ? state.open.progress : state.open.stream;
  if (data.index === list.length + 1) {
    list.push(type === "progress" ? data.output : data.chunk);
    if (type === "progress") renderProgress();
    else renderStream();
  } else if (data.index > list.length + 1 && state.loading === 0) {
    // Something is missing between the detail held and this event: read it again.
    loadJob(data.jobId);
  }
}

function trimJobs() {
  if (state.jobs.size <= MAX_JOBS) return;
  const oldest = [...state.jobs.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  for (const row of oldest.slice(0, state.jobs.size - MAX_JOBS)) state.jobs.delete(row.id);
}

// ---- endpoints and workers ----

function rateText(limits) {
  if (limits.length === 0) return "off";
  const busy = limits.filter((r) => r.used > 0 || r.inFlight > 0);
  if (busy.length === 0) return "idle";
  return busy
    .map(
      (r) =>
        `${r.operation} ${r.used}/${r.perWindow}${r.concurrent === null ? "" : `, ${r.inFlight}/${r.concurrent} in flight`}`,
    )
    .join(" · ");
}

function renderEndpoints() {
  const rows = [...state.endpoints.values()].map((e) =>
    h(
      "tr",
      { "data-endpoint": e.id },
      h("td", { class: "id" }, e.id),
      h("td", { class: "num queue" }, `${e.queue.normal} / ${e.queue.low}`),
      h("td", { class: "num in-progress" }, e.inProgress),
      h("td", { class: "num completed" }, e.ended.COMPLETED),
      h("td", { class: "num failed" }, e.ended.FAILED),
      h("td", { class: "num cancelled" }, e.ended.CANCELLED),
      h("td", { class: "num timed-out" }, e.ended.TIMED_OUT),
      h("td", { class: "num restarts" }, e.restarts),
      h("td", { class: "rates" }, rateText(e.rateLimits)),
    ),
  );
  $("endpoints").tBodies[0].replaceChildren(...rows);
  const select = $("run-endpoint");
  const chosen = select.value;
  select.replaceChildren(...[...state.endpoints.keys()].map((id) => h("option", { value: id }, id)));
  if (state.endpoints.has(chosen)) select.value = chosen;
}

/**
 * A worker's start-up cell: its phase and setup's progress while starting (`setup: weights 40 %`),
 * then `ready in 412 ms (runlet 80 ms, setup 300 ms)` once ready (docs/harness.md, "Workers starting").
 */
function workerStartup(w) {
  if (w.state === "starting") {
    const phase = w.phase ?? "starting";
    return w.progress === undefined ? phase : `${phase}: ${w.progress}`;
  }
  if (w.phases === undefined) return "–";
  const { total, ...each } = w.phases;
  const parts = Object.entries(each).map(([name, ms]) => `${name} ${Math.round(ms)} ms`);
  const took = total === undefined ? "" : ` in ${Math.round(total)} ms`;
  return `ready${took}${parts.length === 0 ? "" : ` (${parts.join(", ")})`}`;
}

function renderWorkers() {
  const all = [...state.workers.values()].flat();
  const rows = all.map((w) =>
    h(
      "tr",
      { "data-worker": w.id },
      h("td", { class: "id" }, w.id),
      h("td", {}, w.endpointId),
      h("td", { class: "state", "data-state": w.state }, w.unhealthy ? `${w.state} (unhealthy)` : w.state),
      h("td", { class: "last-ping" }, clock(w.lastPingAt)),
      h(
        "td",
        { class: "held" },
        w.jobs.length === 0
          ? "none"
          : w.jobs.map((id) =>
              h(
                "a",
                {
                  href: "#",
                  class: "id",
                  onclick: (e) => {
                    e.preventDefault();
                    openJob(id);
                  },
                },
                `${id} `,
              ),
            ),
      ),
      h("td", { class: "startup" }, workerStartup(w)),
    ),
  );
  $("workers").tBodies[0].replaceChildren(...rows);
  $("no-workers").hidden = all.length > 0;
}

// ---- jobs ----

function renderJobs() {
  const rows = [...state.jobs.values()]
    .filter((j) => state.filter === "" || j.status === state.filter)
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  $("jobs").tBodies[0].replaceChildren(
    ...rows.map((j) =>
      h(
        "tr",
        { "data-job": j.id, class: j.id === state.openId ? "open" : undefined, onclick: () => openJob(j.id) },
        h("td", { class: "id" }, j.id),
        h("td", {}, j.endpointId),
        h("td", {}, statusBadge(j.status)),
        h("td", { class: "num" }, ms(j.delayTime)),
        h("td", { class: "num" }, ms(j.executionTime)),
        h("td", {}, clock(j.createdAt)),
      ),
    ),
  );
  $("no-jobs").hidden = rows.length > 0;
}

function openJob(id) {
  state.openId = id;
  state.open = null;
  state.pending = [];
  $("job").hidden = false;
  $("app").classList.remove("single");
  $("job-id").textContent = id;
  $("job-error").textContent = "";
  renderJobs();
  loadJob(id);
}

async function loadJob(id) {
  state.loading++;
  try {
    const detail = await api("GET", `jobs/${encodeURIComponent(id)}`);
    if (state.openId !== id) return;
    state.open = detail;
    renderJob();
  } catch (err) {
    if (state.openId === id) $("job-error").textContent = err.message;
  } finally {
    state.loading--;
    if (state.loading === 0) {
      const pending = state.pending.splice(0);
      for (const { type, data } of pending) {
        if (data.jobId === state.openId && state.open !== null) applyToOpen(type, data);
      }
    }
  }
}

async function act(action) {
  const id = state.openId;
  $("job-error").textContent = "";
  try {
    const detail = await api("POST", `jobs/${encodeURIComponent(id)}/${action}`);
    if (state.openId === id) {
      state.open = detail;
      renderJob();
    }
  } catch (err) {
    $("job-error").textContent = err.message;
  }
}

function renderJob() {
  const job = state.open;
  const status = $("job-status");
  status.textContent = job.status;
  status.dataset.status = job.status;
  $("cancel-job").disabled = TERMINAL.has(job.status);
  $("retry-job").disabled = job.status !== "FAILED" && job.status !== "TIMED_OUT";
  const facts = [
    ["endpoint", job.endpointId],
    ["submitted as", `/${job.kind}`],
    ["worker", job.workerId ?? "–"],
    ["created", clock(job.createdAt)],
    ["started", clock(job.startedAt)],
    ["finished", clock(job.finishedAt)],
    ["delay", ms(job.delayTime)],
    ["execution", ms(job.executionTime)],
    ...(job.lapses > 0 ? [["lost by a worker", `${job.lapses}×`]] : []),
    ...(job.batch
      ? [["batch", `${job.batch.id} · ${job.batch.size} jobs · waited ${ms(job.batch.waitMs)}`]]
      : []),
  ];
  $("job-facts").replaceChildren(...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  $("job-request").textContent = json(job.request);
  $("job-output-box").hidden = !("output" in job);
  $("job-output").textContent = "output" in job ? json(job.output) : "";
  renderFailure(job.error);
  renderTimeline();
  renderMetrics();
  renderProgress();
  renderStream();
  $("webhooks").tBodies[0].replaceChildren(
    ...job.webhookAttempts.map((a) =>
      h(
        "tr",
        {},
        h("td", {}, a.attempt),
        h("td", { class: "id" }, a.url),
        h("td", { class: a.ok ? "" : "error" }, a.outcome),
      ),
    ),
  );
}

/** A handler's error is a JSON report (type, message, traceback); other errors are plain text. */
function renderFailure(error) {
  $("job-failure-box").hidden = error === undefined;
  if (error === undefined) return;
  let report = null;
  try {
    report = JSON.parse(error);
  } catch {
    // Plain text: shown as the message.
  }
  const fields =
    report !== null && typeof report === "object" && typeof report.error_message === "string"
      ? [
          ["type", report.error_type],
          ["message", report.error_message],
          ["worker", report.worker_id],
          ["host", report.hostname],
          ["runpod version", report.runpod_version],
        ]
      : [["message", error]];
  $("job-failure").replaceChildren(
    ...fields
      .filter(([, v]) => v !== undefined)
      .flatMap(([k, v]) => [h("dt", {}, k), h("dd", { class: `failure-${k.replace(" ", "-")}` }, v)]),
  );
  const traceback = report?.error_traceback;
  $("job-traceback").hidden = typeof traceback !== "string" || traceback === "";
  $("job-traceback").textContent = typeof traceback === "string" ? traceback : "";
}

/**
 * The job's timeline (docs/observability.md, "The harness's timeline"): one row a span — queue,
 * setup (a worker's first job), take, handler, progress, stream, result, webhook — each bar placed
 * on one time axis from the job's first span to its last end (an open span runs to now).
 */
function renderTimeline() {
  const spans = state.open.timeline ?? [];
  $("job-timeline-box").hidden = spans.length === 0;
  if (spans.length === 0) return;
  const now = Date.now();
  const t0 = Math.min(...spans.map((s) => s.start));
  const t1 = Math.max(t0 + 1, ...spans.map((s) => s.end ?? now));
  const pct = (t) => `${(((t - t0) / (t1 - t0)) * 100).toFixed(2)}%`;
  $("job-timeline").replaceChildren(
    ...spans.map((s) => {
      const end = s.end ?? now;
      const detail = Object.entries(s.attributes)
        .map(([k, v]) => `${k}=${v}`)
        .join(" ");
      const label = `${s.name} · ${ms(end - s.start)}${s.end === undefined ? " (running)" : ""}${detail === "" ? "" : ` · ${detail}`}`;
      const bar = h("span", {
        class: `tl-bar tl-${s.name}${s.end === undefined ? " tl-open" : ""}`,
        title: label,
        "data-start": String(s.start - t0),
        "data-ms": String(end - s.start),
      });
      // Through the CSSOM: the page's CSP refuses style attributes.
      bar.style.left = pct(s.start);
      bar.style.width = `max(2px, calc(${pct(end)} - ${pct(s.start)}))`;
      return h(
        "div",
        { class: "tl-row", "data-span": s.name },
        h("span", { class: "tl-name" }, s.name),
        h("span", { class: "tl-track" }, bar),
        h("span", { class: "tl-ms" }, ms(end - s.start)),
      );
    }),
  );
}

/** The handler's own metrics (`ctx.metrics`) of the open job, when its worker reported them. */
function renderMetrics() {
  const metrics = state.open.metrics ?? {};
  const entries = Object.entries(metrics);
  $("job-metrics-box").hidden = entries.length === 0;
  $("job-metrics").replaceChildren(
    ...entries.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-metric": k }, String(v))]),
  );
}

function renderProgress() {
  $("job-progress").replaceChildren(
    ...state.open.progress.map((p) => h("li", {}, h("code", {}, JSON.stringify(p)))),
  );
}

/**
 * The stream as the handler yielded it: a chunk's metrics say which item it belongs to and how it
 * is encoded; items split into parts are joined first. String items are text, joined in order;
 * other items are listed with their metrics.
 */
function assemble(chunks) {
  let text = "";
  const items = [];
  const partial = new Map();
  const emit = (value, metrics) => {
    if (typeof value === "string") text += value;
    else items.push({ value, metrics });
  };
  for (const chunk of chunks) {
    const m = chunk.metrics ?? {};
    if (typeof m.parts !== "number" || m.parts <= 1 || typeof m.streamIndex !== "number") {
      emit(chunk.output, m);
      continue;
    }
    const item = partial.get(m.streamIndex) ?? { parts: [], got: 0 };
    if (item.parts[m.part] === undefined) item.got++;
    item.parts[m.part] = chunk.output;
    partial.set(m.streamIndex, item);
    if (item.got < m.parts) continue;
    partial.delete(m.streamIndex);
    const joined = item.parts.join("");
    if (m.encoding === "json-text") {
      try {
        emit(JSON.parse(joined), m);
      } catch {
        emit({ unreadable: joined.slice(0, 200) }, m);
      }
    } else if (m.encoding === "base64") emit({ base64Bytes: m.bytes }, m);
    else emit(joined, m);
  }
  return { text, items };
}

/** Metrics runlet puts on every chunk; the rest of a chunk's metrics are the handler's own. */
const RUNLET_CHUNK_METRICS = new Set(["streamIndex", "part", "parts", "encoding", "bytes"]);

function renderStream() {
  const chunks = state.open.stream;
  const { text, items } = assemble(chunks);
  $("stream-count").textContent = chunks.length === 0 ? "(none)" : `(${chunks.length} chunks)`;
  $("stream-text").textContent = text;
  const withMetrics = chunks
    .map((chunk, i) => [
      i + 1,
      Object.entries(chunk.metrics ?? {}).filter(([k]) => !RUNLET_CHUNK_METRICS.has(k)),
    ])
    .filter(([, own]) => own.length > 0);
  $("chunk-metrics").hidden = withMetrics.length === 0;
  $("chunk-metrics").tBodies[0].replaceChildren(
    ...withMetrics.map(([n, own]) =>
      h(
        "tr",
        { "data-chunk": n },
        h("td", { class: "num" }, n),
        h("td", { class: "metrics" }, own.map(([k, v]) => `${k}=${v}`).join(" ")),
      ),
    ),
  );
  renderReply(text);
  $("stream-items").replaceChildren(
    ...items.map(({ value, metrics }) =>
      h(
        "li",
        {},
        h("code", {}, JSON.stringify(value)),
        " ",
        h("span", { class: "metrics" }, JSON.stringify(metrics)),
      ),
    ),
  );
}

/** An OpenAI job's reply, read from its stream (or its output); its raw stream is folded away beneath. */
function renderReply(streamText) {
  const route = openAIRouteOf(state.open);
  const reply = route === null ? null : openAIReplyOf(streamText, state.open.output);
  const box = $("openai-box");
  const wasHidden = box.hidden;
  box.hidden = route === null;
  // An OpenAI job opens folded to its reply; any other opens with its stream shown.
  if (wasHidden !== box.hidden || route === null) $("stream-box").open = route === null;
  if (route === null) return;
  $("openai-route").textContent = route;
  $("openai-text").textContent = reply?.text ?? "";
  $("openai-tools").replaceChildren(
    ...(reply?.toolCalls ?? [])
      .filter((c) => c !== undefined)
      .map((c) =>
        h("li", { class: "tool-call" }, h("code", {}, `${c.name}(${c.arguments})`), c.id ? ` ${c.id}` : ""),
      ),
  );
  const usage = reply?.usage;
  const facts = [
    ["finish reason", reply?.finishReason ?? (TERMINAL.has(state.open.status) ? "–" : "(still generating)")],
    ...(reply?.model ? [["model", reply.model]] : []),
    ...(usage
      ? [
          [
            "usage",
            `${usage.prompt_tokens ?? "?"} prompt + ${usage.completion_tokens ?? "?"} completion = ${usage.total_tokens ?? "?"} tokens`,
          ],
        ]
      : []),
    ...(reply?.error ? [["error", reply.error]] : []),
  ];
  $("openai-facts").replaceChildren(
    ...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { class: `openai-${k.replace(" ", "-")}` }, v)]),
  );
}

// ---- run a request ----

/** The chosen endpoint's handler info, when its worker described it. */
const chosenHandler = () => state.handlers.get($("run-endpoint").value);

/** What the form starts from: test_input.json when given, else a valid example of the handler's input schema. */
function startingBody() {
  if (state.sample !== undefined) return state.sample;
  const info = chosenHandler();
  if (info?.openai) {
    return {
      input: {
        openai_route: "/v1/chat/completions",
        openai_input: { model: info.models?.[0] ?? "…", messages: [{ role: "user", content: "Hello" }] },
      },
    };
  }
  return { input: info === undefined ? {} : exampleOf(info.inputSchema) };
}

function fillEditor(force = false) {
  if (!state.editorTouched || force) {
    $("request").value = json(startingBody());
    state.editorTouched = false;
  }
  renderSchema();
}

/** The chosen handler's fields, its schema's note, and the errors of the editor's input against it. */
function renderSchema() {
  const info = chosenHandler();
  const fields = info === undefined || info.openai ? [] : fieldsOf(info.inputSchema);
  $("schema-box").hidden = info === undefined || info.openai;
  if (info === undefined || info.openai) return;
  $("schema-fields").replaceChildren(
    ...fields.flatMap((f, i) => [
      i === 0 ? "" : ", ",
      h(
        "code",
        { class: f.required ? "field required-field" : "field", "data-field": f.name, title: f.description },
        `${f.name}${f.required ? "*" : ""}: ${f.type}${"default" in f ? ` = ${JSON.stringify(f.default)}` : ""}`,
      ),
    ]),
    fields.length === 0 ? "(any JSON value)" : "",
  );
  $("schema-note").hidden = info.schemaNote === undefined;
  $("schema-note").textContent = info.schemaNote ?? "";
  let errors = [];
  try {
    const body = JSON.parse($("request").value);
    errors = validate(info.inputSchema, body?.input);
  } catch {
    // Not JSON (yet): Send says so.
  }
  $("schema-errors").replaceChildren(...errors.map((e) => h("li", {}, `${e.path} ${e.message}`)));
}

async function submit(event) {
  event.preventDefault();
  const error = $("run-error");
  error.textContent = "";
  let body;
  try {
    body = JSON.parse($("request").value);
  } catch (err) {
    error.textContent = `the request body is not JSON: ${err.message}`;
    return;
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    error.textContent = 'the request body must be a JSON object such as {"input": {}}';
    return;
  }
  const policy = { ...(body.policy ?? {}) };
  const timeout = $("policy-timeout").value;
  const ttl = $("policy-ttl").value;
  if (timeout !== "") policy.executionTimeout = Number(timeout);
  if (ttl !== "") policy.ttl = Number(ttl);
  if ($("policy-low").checked) policy.lowPriority = true;
  if (Object.keys(policy).length > 0) body.policy = policy;
  const webhook = $("run-webhook").value.trim();
  if (webhook !== "") body.webhook = webhook;
  try {
    const { id } = await api("POST", "jobs", {
      endpointId: $("run-endpoint").value,
      route: $("run-route").value,
      body,
    });
    openJob(id);
  } catch (err) {
    error.textContent = err.message;
  }
}

// ---- start ----

function start() {
  takeTokenFromLink();
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("key-input").value.trim());
    $("key-input").value = "";
    follow();
  });
  $("run-form").addEventListener("submit", submit);
  $("request").addEventListener("input", () => {
    state.editorTouched = true;
    renderSchema();
  });
  $("run-endpoint").addEventListener("change", () => fillEditor());
  $("schema-reset").addEventListener("click", () => fillEditor(true));
  $("status-filter").addEventListener("change", (event) => {
    state.filter = event.target.value;
    renderJobs();
  });
  $("cancel-job").addEventListener("click", () => act("cancel"));
  $("retry-job").addEventListener("click", () => act("retry"));
  $("close-job").addEventListener("click", () => {
    state.openId = null;
    state.open = null;
    $("job").hidden = true;
    $("app").classList.add("single");
    renderJobs();
  });
  if (token()) follow();
  else lock();
  setInterval(pollLoadBalancers, 2_000);
}

// ---- load-balancing endpoints (polled: they have no job events) ----

async function pollLoadBalancers() {
  if (!token() || $("app").hidden) return;
  const data = await api("GET", "load-balancers").catch(() => undefined);
  const balancers = data?.loadBalancers ?? [];
  $("lb").hidden = balancers.length === 0;
  $("lb-workers").tBodies[0].replaceChildren(
    ...balancers.flatMap((b) =>
      b.workers.map((w) =>
        h(
          "tr",
          {},
          h("td", {}, w.id),
          h("td", {}, b.id),
          h("td", {}, w.health),
          h("td", {}, `${w.inFlight} / ${w.concurrency}`),
          h("td", {}, w.served),
        ),
      ),
    ),
  );
  $("lb-requests").tBodies[0].replaceChildren(
    ...balancers
      .flatMap((b) => b.requests.map((r) => ({ ...r, endpoint: b.id })))
      .sort((a, b) => b.at - a.at)
      .slice(0, 50)
      .map((r) =>
        h(
          "tr",
          {},
          h("td", {}, new Date(r.at).toLocaleTimeString()),
          h("td", {}, r.endpoint),
          h("td", {}, `${r.method} ${r.path}`),
          h("td", {}, r.status),
          h("td", {}, r.workerId ?? "–"),
          h("td", {}, r.affinity),
          h("td", {}, ms(r.ms)),
        ),
      ),
  );
}

start();
