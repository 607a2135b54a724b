// Node state: what stack.json may declare (docs/bundles.md, "state"), and the
// checks that keep a stack from starting on anything but the node's own data
// (docs/migration.md, "Node state"). Plain files under a scratch root; the
// sandbox tests run the same checks on real systemd.
import { join } from "node:path";
import * as host from "../lib/host/mod.ts";
import * as isolation from "../lib/isolation/mod.ts";
import { assert, assertEquals, assertRejects } from "./support/assert.ts";

async function stackDir(doc: unknown): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "stratum-stack-" });
  await Deno.writeTextFile(join(dir, "stack.json"), JSON.stringify(doc));
  return dir;
}

const base = {
  services: [{ name: "node", exec: ["/bin/true"] }],
  health: { url: "http://127.0.0.1:1/healthz" },
};

Deno.test("readStack: state is the list it declares, and empty when absent", async () => {
  const dir = await stackDir({ ...base, state: ["/var/lib/etcd-node", "/var/lib/kubelet"] });
  assertEquals((await isolation.readStack(dir)).state, ["/var/lib/etcd-node", "/var/lib/kubelet"]);
  assertEquals((await isolation.readStack(await stackDir(base))).state, []);
});

// Each entry the spec refuses, with the words its one-line error must carry.
const refused: [string, unknown, string][] = [
  ["a relative path", ["var/lib/etcd"], "not absolute"],
  ["a .. component", ["/var/lib/../etc"], '".."'],
  ["a . component", ["/var/./lib"], '"."'],
  ["the root itself", ["/"], "not a normalised path"],
  ["a trailing slash", ["/var/lib/etcd/"], "not a normalised path"],
  ["a double slash", ["/var//lib"], "not a normalised path"],
  ["stratum's own tree", ["/var/lib/stratum/data"], "inside /var/lib/stratum"],
  ["a slot", ["/var/lib/stratum/slots/a"], "inside /var/lib/stratum"],
  ["/usr", ["/usr/local/etcd"], "inside /usr"],
  ["/proc", ["/proc/1"], "inside /proc"],
  ["/sys", ["/sys"], "inside /sys"],
  ["/dev", ["/dev/shm/x"], "inside /dev"],
  ["/run", ["/run/etcd"], "inside /run"],
  ["two entries that overlap", ["/var/lib/k", "/var/lib/k/pods"], "overlap"],
  ["the same entry twice", ["/var/lib/k", "/var/lib/k"], "overlap"],
  ["a non-string entry", [7], "must be strings"],
  ["not a list", "/var/lib/k", "must be a list"],
];
for (const [what, state, words] of refused) {
  Deno.test(`readStack refuses ${what} in state, naming it`, async () => {
    const dir = await stackDir({ ...base, state });
    const err = await assertRejects(() => isolation.readStack(dir));
    assert(err instanceof isolation.ErrBadStack, String(err));
    assert(err.message.includes(words), err.message);
    assert(!err.message.includes("\n"), "one line");
  });
}

Deno.test("readStack: a prefix that is not a parent is no overlap (/var/lib/k and /var/lib/kube)", async () => {
  const dir = await stackDir({ ...base, state: ["/var/lib/k", "/var/lib/kube"] });
  assertEquals((await isolation.readStack(dir)).state.length, 2);
});

for (
  const [what, doc, name] of [
    ["a top-level typo", { ...base, stat: ["/var/lib/etcd"] }, '"stat"'],
    ["a service field", { ...base, services: [{ name: "n", exec: ["/x"], user: "x" }] }, '"user"'],
    ["a health field", { ...base, health: { url: "http://x/", path: "/h" } }, '"path"'],
  ] as const
) {
  Deno.test(`readStack refuses an unknown field (${what}), naming it`, async () => {
    const err = await assertRejects(async () => isolation.readStack(await stackDir(doc)));
    assert(err instanceof isolation.ErrBadStack && err.message.includes(name), String(err));
  });
}

Deno.test("readStack refuses two services of one name", async () => {
  const doc = { ...base, services: [base.services[0], base.services[0]] };
  const err = await assertRejects(async () => isolation.readStack(await stackDir(doc)));
  assert(err instanceof isolation.ErrBadStack && err.message.includes("twice"), String(err));
});

Deno.test("readStack: services start after the ones they name, and one may delegate its cgroups", async () => {
  const doc = {
    ...base,
    services: [
      { name: "containerd", exec: ["/bin/true"], delegate: true },
      { name: "kubelet", exec: ["/bin/true"], after: ["containerd"] },
    ],
  };
  assertEquals((await isolation.readStack(await stackDir(doc))).services, [
    { name: "containerd", exec: ["/bin/true"], delegate: true },
    { name: "kubelet", exec: ["/bin/true"], after: ["containerd"] },
  ]);
});

// The ordering the stack declares must be one systemd can carry out.
for (
  const [what, services, words] of [
    ["a service it does not list", [{ name: "a", exec: ["/x"], after: ["b"] }], "not a service"],
    ["itself", [{ name: "a", exec: ["/x"], after: ["a"] }], "itself"],
    [
      "a cycle",
      [
        { name: "a", exec: ["/x"], after: ["c"] },
        { name: "b", exec: ["/x"], after: ["a"] },
        { name: "c", exec: ["/x"], after: ["b"] },
      ],
      "cycle: a → c → b → a",
    ],
    ["not a list", [{ name: "a", exec: ["/x"], after: "b" }], "must list service names"],
    ["delegate not a boolean", [{ name: "a", exec: ["/x"], delegate: "yes" }], "true or false"],
  ] as const
) {
  Deno.test(`readStack refuses a service ordered after ${what}`, async () => {
    const err = await assertRejects(async () =>
      isolation.readStack(await stackDir({ ...base, services }))
    );
    assert(err instanceof isolation.ErrBadStack && err.message.includes(words), String(err));
    assert(!err.message.includes("\n"), "one line");
  });
}

Deno.test("readStack: health may add a command probe; one that is not a command line is refused", async () => {
  const exec = ["/usr/bin/ctr", "version"];
  const ok = await isolation.readStack(
    await stackDir({ ...base, health: { ...base.health, exec } }),
  );
  assertEquals(ok.health, { url: base.health.url, exec });
  for (const bad of [[], ["ctr", "version"], "/usr/bin/ctr version", [7]]) {
    const err = await assertRejects(async () =>
      isolation.readStack(await stackDir({ ...base, health: { ...base.health, exec: bad } }))
    );
    assert(
      err instanceof isolation.ErrBadStack && err.message.includes("health.exec"),
      String(err),
    );
  }
});

Deno.test("readStack: workloads name cgroups outside systemd's own; the root or a slice of systemd's is refused", async () => {
  const ok = await isolation.readStack(
    await stackDir({ ...base, workloads: ["/stratum", "/kubepods.slice"] }),
  );
  assertEquals(ok.workloads, ["/stratum", "/kubepods.slice"]);
  for (
    const bad of [
      "/",
      "stratum",
      "/stratum/",
      "/a/../system.slice",
      "/system.slice",
      "/system.slice/stratum-b-etcd.service",
      "/init.scope",
      "/user.slice/user-0.slice",
      "/machine.slice",
      7,
    ]
  ) {
    const err = await assertRejects(async () =>
      isolation.readStack(await stackDir({ ...base, workloads: [bad] }))
    );
    assert(
      err instanceof isolation.ErrBadStack && err.message.includes('"workloads"') &&
        err.message.includes(JSON.stringify(bad)),
      String(err),
    );
    assert(!err.message.includes("\n"), "one line");
  }
  const notList = await assertRejects(async () =>
    isolation.readStack(await stackDir({ ...base, workloads: "/stratum" }))
  );
  assert(notList instanceof isolation.ErrBadStack, String(notList));
});

/** A scratch root with an identity, as a node after its first install. */
async function node(): Promise<{ paths: host.HostPaths; id: isolation.NodeIdentity }> {
  const paths = host.hostPaths(await Deno.makeTempDir({ prefix: "stratum-root-" }));
  return { paths, id: await isolation.ensureIdentity(paths, "node-1") };
}

Deno.test("claimState makes absent directories 0700 and marks them; checkState then passes", async () => {
  const { paths, id } = await node();
  await isolation.claimState(paths, ["/var/lib/etcd-node"], id);
  const st = await Deno.stat(paths.at("/var/lib/etcd-node"));
  assertEquals(st.mode! & 0o777, 0o700);
  const marker = JSON.parse(
    await Deno.readTextFile(paths.at(`/var/lib/etcd-node/${isolation.stateMarkerName}`)),
  );
  assertEquals([marker.id, marker.path], [id.id, "/var/lib/etcd-node"]);
  await isolation.checkState(paths, ["/var/lib/etcd-node"]);
});

Deno.test("ensureIdentity makes one identity and keeps it", async () => {
  const { paths, id } = await node();
  assertEquals(await isolation.ensureIdentity(paths, "other-name"), id);
  assert(/^[0-9a-f]{32}$/.test(id.id));
});

Deno.test("checkState refuses a missing, an empty, a foreign, a moved and a linked directory", async () => {
  const { paths, id } = await node();
  const check = (p: string) => isolation.checkState(paths, [p]);
  const refuses = async (p: string, words: string) => {
    const err = await assertRejects(() => check(p));
    assert(err instanceof isolation.ErrState, String(err));
    assertEquals(err.path, p);
    assert(err.message.includes(words), err.message);
  };
  await refuses("/var/lib/none", "missing");
  await Deno.mkdir(paths.at("/var/lib/empty"), { recursive: true });
  await refuses("/var/lib/empty", "has no .stratum-state.json");
  // Another node's data: marked with another identity.
  const other = host.hostPaths(await Deno.makeTempDir());
  await isolation.claimState(
    paths,
    ["/var/lib/foreign"],
    await isolation.ensureIdentity(other, "node-2"),
  );
  await refuses("/var/lib/foreign", "another node's");
  // This node's data, but of another path (kubelet's copied over etcd's).
  await isolation.claimState(paths, ["/var/lib/kubelet"], id);
  await Deno.mkdir(paths.at("/var/lib/moved"));
  await Deno.copyFile(
    paths.at(`/var/lib/kubelet/${isolation.stateMarkerName}`),
    paths.at(`/var/lib/moved/${isolation.stateMarkerName}`),
  );
  await refuses("/var/lib/moved", "another path's");
  // A link to the node's own marked data is still refused: the path must be real.
  await Deno.symlink(paths.at("/var/lib/kubelet"), paths.at("/var/lib/linked"));
  await refuses("/var/lib/linked", "symlink");
  await check("/var/lib/kubelet");
});

Deno.test("planState: absent is create, empty is claimed, unmarked data is refused, marked is ok", async () => {
  const { paths, id } = await node();
  await isolation.claimState(paths, ["/srv/ok"], id);
  await Deno.mkdir(paths.at("/srv/empty"), { recursive: true });
  assertEquals(await isolation.planState(paths, ["/srv/ok", "/srv/new", "/srv/empty"], id), [
    { path: "/srv/ok", action: "ok" },
    { path: "/srv/new", action: "create" },
    { path: "/srv/empty", action: "claim-empty" },
  ]);
  await Deno.writeTextFile(paths.at("/srv/empty/member"), "x");
  const err = await assertRejects(() => isolation.planState(paths, ["/srv/empty"], id));
  assert(err instanceof isolation.ErrState && err.path === "/srv/empty", String(err));
  // Nothing was made or marked by a plan.
  assertEquals(await Deno.stat(paths.at("/srv/new")).then(() => true, () => false), false);
});

Deno.test("claimState leaves the node's marked data alone and refuses before touching any when one is foreign", async () => {
  const { paths, id } = await node();
  await isolation.claimState(paths, ["/srv/a"], id);
  await Deno.writeTextFile(paths.at("/srv/a/data"), "kept");
  await Deno.mkdir(paths.at("/srv/b"));
  await Deno.writeTextFile(paths.at("/srv/b/data"), "somebody's");
  await assertRejects(() => isolation.claimState(paths, ["/srv/new", "/srv/b"], id));
  assertEquals(await Deno.stat(paths.at("/srv/new")).then(() => true, () => false), false);
  await isolation.claimState(paths, ["/srv/a"], id);
  assertEquals(await Deno.readTextFile(paths.at("/srv/a/data")), "kept");
});
