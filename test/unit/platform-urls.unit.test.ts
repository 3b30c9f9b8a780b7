import { describe, expect, it } from "vitest";
import { withQuery } from "../../src/protocol/index.js";
import { platformUrls } from "../../src/worker/platform/platform-urls.js";

const base = "http://h/v2/ep";
const urls = platformUrls({
  jobTakeUrl: `${base}/job-take/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
  jobDoneUrl: `${base}/job-done/$RUNPOD_POD_ID/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
  jobStreamUrl: `${base}/job-stream/$RUNPOD_POD_ID/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
  pingUrl: `${base}/ping/$RUNPOD_POD_ID?gpu=$RUNPOD_GPU_TYPE_ID`,
  podId: "pod 1",
  gpuTypeId: "A100",
});

describe("platformUrls", () => {
  it("builds every worker URL from the templates, ids encoded, the job id per call", () => {
    expect(urls.take(1, false)).toBe(`${base}/job-take/pod%201?gpu=A100&job_in_progress=0`);
    expect(urls.take(3, true)).toBe(`${base}/job-take-batch/pod%201?gpu=A100&batch_size=3&job_in_progress=1`);
    expect(urls.stop).toBe(`${base}/job-stop/pod%201?gpu=A100`);
    expect(urls.ping).toBe(`${base}/ping/pod%201?gpu=A100`);
    expect(urls.done("job/$ID", true)).toBe(`${base}/job-done/pod%201/job%2F%24ID?gpu=A100&isStream=true`);
    expect(urls.stream("j1")).toBe(`${base}/job-stream/pod%201/j1?gpu=A100&isStream=false`);
  });

  it("has no stop channel without a /job-take/ segment, and no stream or ping without templates", () => {
    const bare = platformUrls({
      jobTakeUrl: "http://h/take/$ID",
      jobDoneUrl: "http://h/done/$ID",
      jobStreamUrl: undefined,
      pingUrl: undefined,
      podId: "p",
      gpuTypeId: "g",
    });
    expect(bare.stop).toBeUndefined();
    expect(bare.ping).toBeUndefined();
    expect(bare.stream("j")).toBeUndefined();
    expect(bare.take(2, false)).toBe("http://h/take/p?batch_size=2&job_in_progress=0");
  });

  it("gives each job the URL that building it anew would, wherever the template puts the id", () => {
    const ids = ["j1", "job/$ID", "a b", "ü%?#&=+", "RUNLETJOBIDMARK", ""];
    const templates = [
      "http://h/v2/ep/job-done/$RUNPOD_POD_ID/$ID?gpu=$RUNPOD_GPU_TYPE_ID",
      "http://h/v2/ep/job-done/$RUNPOD_POD_ID/$ID",
      // The id in the query: setting isStream re-serialises the query, so these are built per job.
      "http://h/done?job=$ID&pod=$RUNPOD_POD_ID",
      "http://h/done/x?a=b c&job=$ID",
      // A template that already holds the text that marks the id while building.
      "http://h/RUNLETJOBIDMARK/$ID",
    ];
    for (const template of templates) {
      const made = platformUrls({
        jobTakeUrl: "http://h/v2/ep/job-take/$ID",
        jobDoneUrl: template,
        jobStreamUrl: template,
        pingUrl: undefined,
        podId: "pod 1",
        gpuTypeId: "A100",
      });
      const fixed = template
        .replaceAll("$RUNPOD_POD_ID", "pod%201")
        .replaceAll("$RUNPOD_GPU_TYPE_ID", "A100");
      for (const id of ids) {
        const anew = (isStream: string) =>
          withQuery(fixed.replaceAll("$ID", encodeURIComponent(id)), { isStream });
        expect(made.done(id, false)).toBe(anew("false"));
        expect(made.done(id, true)).toBe(anew("true"));
        expect(made.stream(id)).toBe(anew("false"));
      }
    }
  });

  it("keeps a dot-segment id in the path, where parsing the URL anew would drop a segment", () => {
    expect(urls.done("..", false)).toBe(`${base}/job-done/pod%201/..?gpu=A100&isStream=false`);
  });
});
