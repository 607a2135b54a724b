// Talks to the etcd of the etcd bundle inside a sandboxed node, through
// etcd's own v3 JSON gateway (python3 from the sandbox's /usr, one process
// per batch), and watches that no two etcd processes ever run at once.

import { join } from "node:path";
import { etcdUrl } from "./bundle.ts";
import { repoRoot, type Sandbox } from "./sandbox.ts";

/** Anything that runs argv on a node: the systemd sandbox, or a VM with its own kernel. */
export interface Runs {
  exec(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
}

const client = `
import base64, json, sys, urllib.request
url, op, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
b64 = lambda s: base64.b64encode(s.encode()).decode()
def call(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)
if op == "put":
    rev = 0
    for i in range(n):
        r = call("/v3/kv/put", {"key": b64("%s%04d" % (prefix, i)), "value": b64("v%d" % i)})
        rev = int(r["header"]["revision"])
    print(json.dumps({"acked": n, "revision": rev}))
else:
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    r = call("/v3/kv/range", {"key": b64(prefix), "range_end": b64(end)})
    keys = sorted(base64.b64decode(kv["key"]).decode() for kv in r.get("kvs", []))
    print(json.dumps({"keys": keys, "revision": int(r["header"]["revision"])}))
`;

/** Writes n keys `PREFIX0000`… and returns how many etcd acknowledged and its revision after. */
export async function putKeys(
  sb: Runs,
  prefix: string,
  n: number,
): Promise<{ acked: number; revision: number }> {
  const r = await sb.exec(["python3", "-c", client, etcdUrl, "put", prefix, String(n)]);
  if (r.code !== 0) throw new Error(`etcd put failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The keys under `prefix` and etcd's current revision. */
export async function getKeys(
  sb: Runs,
  prefix: string,
): Promise<{ keys: string[]; revision: number }> {
  const r = await sb.exec(["python3", "-c", client, etcdUrl, "get", prefix, "0"]);
  if (r.code !== 0) throw new Error(`etcd get failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The names `prefix0000`… that putKeys wrote. */
export function keyNames(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, "0")}`);
}

/**
 * Writes batches of `n` keys (`k0/`, `k1/`, …), each asserted acknowledged,
 * and keeps the names written: what must be there after every move or cut.
 */
export function keyBatches(sb: Runs, n: number): { write(): Promise<void>; written: string[] } {
  const written: string[] = [];
  let batch = 0;
  return {
    written,
    async write() {
      const prefix = `k${batch++}/`;
      const r = await putKeys(sb, prefix, n);
      if (r.acked !== n) throw new Error(`etcd acknowledged ${r.acked} of ${n} keys`);
      written.push(...keyNames(prefix, n));
    },
  };
}

/**
 * Samples the sandbox's process table every 5 ms for etcd processes and
 * records the most seen at once, until stopped. Two at once would mean two
 * stacks had the node's data open together.
 */
export class EtcdWatch implements AsyncDisposable {
  readonly #file: string;
  readonly #child: Deno.ChildProcess;
  private constructor(file: string, child: Deno.ChildProcess) {
    this.#file = file;
    this.#child = child;
  }

  static async start(sb: Sandbox): Promise<EtcdWatch> {
    await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
    const file = await Deno.makeTempFile({ dir: join(repoRoot, ".test-tmp"), prefix: "etcd-max-" });
    const child = sb.spawn([
      "bash",
      "-c",
      `max=0; while :; do n=$(pgrep -xc etcd); if [ "$n" -gt "$max" ]; then max=$n; echo $max > ${file}; fi; sleep 0.005; done`,
    ]);
    return new EtcdWatch(file, child);
  }

  /** The most etcd processes seen at once so far. */
  async max(): Promise<number> {
    return Number((await Deno.readTextFile(this.#file)).trim() || "0");
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      this.#child.kill("SIGKILL");
    } catch { /* gone with a power cut */ }
    await this.#child.status;
    await this.#child.stdout.cancel().catch(() => {});
    await this.#child.stderr.cancel().catch(() => {});
    await Deno.remove(this.#file).catch(() => {});
  }
}
