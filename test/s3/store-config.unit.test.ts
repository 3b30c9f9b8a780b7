import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/log/index.js";
import { envBucketName, isPrivateAddress, regionFromEndpoint, resolveStore } from "../../src/s3/index.js";

const log = createLogger({ platform: true, level: "silent" });
const base = { jobId: "j", signal: new AbortController().signal, log };

describe("regionFromEndpoint", () => {
  it.each([
    ["https://s3.eu-west-1.amazonaws.com", "eu-west-1"],
    ["https://my-bucket.s3.ap-southeast-2.amazonaws.com", "ap-southeast-2"],
    ["https://s3.dualstack.us-west-2.amazonaws.com", "us-west-2"],
    ["https://s3.us-gov-west-1.amazonaws.com", "us-gov-west-1"],
    ["https://s3.us-west-004.backblazeb2.com", "us-west-004"],
    ["https://nyc3.digitaloceanspaces.com", "nyc3"],
    ["https://s3.amazonaws.com", "us-east-1"],
    ["https://abc123.r2.cloudflarestorage.com", "us-east-1"],
    ["http://127.0.0.1:9000", "us-east-1"],
    ["not a url", "us-east-1"],
  ])("reads %s as %s", (url, region) => {
    expect(regionFromEndpoint(url)).toBe(region);
  });
});

describe("envBucketName", () => {
  const now = new Date(Date.UTC(2026, 10, 21));
  it("prefers an explicit name, then the endpoint's first path segment, then the Python SDK's MM-YY", () => {
    expect(envBucketName(new URL("https://host/ignored"), "explicit", now)).toBe("explicit");
    expect(envBucketName(new URL("https://host/my-bucket/extra"), undefined, now)).toBe("my-bucket");
    expect(envBucketName(new URL("https://host"), undefined, now)).toBe("11-26");
    expect(envBucketName(new URL("https://host/"), "  ", new Date(Date.UTC(2027, 0, 1)))).toBe("01-27");
  });
});

describe("resolveStore", () => {
  const s3Config = {
    accessId: "id",
    accessSecret: "secret",
    bucketName: "b",
    endpointUrl: "https://s3.eu-west-1.amazonaws.com",
  };

  it("takes the job's s3Config over the environment store", () => {
    const r = resolveStore({
      ...base,
      s3Config,
      bucket: { endpointUrl: "https://other/env-bucket", accessKeyId: "e", secretAccessKey: "es" },
    });
    expect(r).toEqual({
      kind: "store",
      store: {
        endpoint: "https://s3.eu-west-1.amazonaws.com",
        region: "eu-west-1",
        bucket: "b",
        accessKeyId: "id",
        secretAccessKey: "secret",
        source: "s3Config",
      },
    });
  });

  it("drops a bucket segment pasted into s3Config.endpointUrl, since requests are path-style", () => {
    const r = resolveStore({
      ...base,
      s3Config: { ...s3Config, endpointUrl: "http://127.0.0.1:9000/b/" },
      bucket: undefined,
    });
    expect(r.kind === "store" && r.store.endpoint).toBe("http://127.0.0.1:9000");
  });

  it("resolves the environment store with its bucket from the URL path", () => {
    const r = resolveStore({
      ...base,
      s3Config: undefined,
      bucket: {
        endpointUrl: "https://nyc3.digitaloceanspaces.com/renders",
        accessKeyId: "e",
        secretAccessKey: "es",
      },
    });
    expect(r).toEqual({
      kind: "store",
      store: {
        endpoint: "https://nyc3.digitaloceanspaces.com",
        region: "nyc3",
        bucket: "renders",
        accessKeyId: "e",
        secretAccessKey: "es",
        source: "env",
      },
    });
  });

  it("names every bad field of a malformed s3Config and never echoes the secret", () => {
    const r = resolveStore({
      ...base,
      s3Config: { accessId: 5, accessSecret: "top-secret-value", bucketName: "", endpointUrl: "x" } as never,
      bucket: undefined,
    });
    expect(r).toEqual({
      kind: "invalid",
      message:
        "the job's s3Config is invalid: s3Config.accessId must be a string; s3Config.bucketName must be a non-empty string",
    });
    const bad = resolveStore({
      ...base,
      s3Config: { ...s3Config, endpointUrl: "ftp://h" },
      bucket: undefined,
    });
    expect(bad).toEqual({
      kind: "invalid",
      message: 'the job\'s s3Config is invalid: s3Config.endpointUrl must be an http(s) URL, got "ftp://h"',
    });
  });

  it("reports no store when neither is given", () => {
    expect(resolveStore({ ...base, s3Config: undefined, bucket: undefined }).kind).toBe("none");
  });
});

describe("isPrivateAddress", () => {
  it.each([
    "127.0.0.1",
    "127.255.0.9",
    "10.0.0.1",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "::1",
    "::",
    "fe80::1",
    "fd00::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "[::1]",
  ])("refuses %s", (address) => {
    expect(isPrivateAddress(address)).toBe(true);
  });

  it.each([
    "8.8.8.8",
    "172.32.0.1",
    "192.169.0.1",
    "1.1.1.1",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",
    "example.com",
  ])("allows %s", (address) => {
    expect(isPrivateAddress(address)).toBe(false);
  });
});
