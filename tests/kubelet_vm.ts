// deno-lint-ignore-file no-console
// A real kubelet through the moves (`deno task test:kubelet`, not part of
// the README's test command: kubelet and kube-apiserver are built from
// source, which CI cannot reach; scripts/test_kubelet.ts skips the whole
// task with one line without them). In the VM (its own kernel, cgroup v2):
// a kube-apiserver and its etcd on the node as host services outside the
// node's stack, the node's credentials provisioned under /var/lib/kubelet
// before the first install (as cloud-init or `kubeadm join` would) and
// adopted by `node install --adopt-state`, and the worker stack
// examples/node-stack/build.sh makes with KUBELET= (containerd with CRI and
// systemd cgroups, runc, CNI bridge, a preloaded pause image), releases 1
// and 2. One node, chained: installed in host mode; host → nspawn killed
// (SIGKILL) after `stopping-source`, `migrate resume` rolls back to host;
// `node upgrade` to release 2 and `node rollback` in host mode; moved to
// nspawn; upgraded to release 2 in nspawn mode; moved to host; host →
// nspawn with a power cut after `awaiting-ready`, the boot completes it in
// nspawn mode with no command; nspawn → host killed after `awaiting-ready`,
// `migrate resume` completes it; host → nspawn with a power cut after
// `stopping-source`, the boot rolls back to host. A second node is installed
// in nspawn mode. After each step:
// - the Node is Ready, and every pod Running and Ready: a static pod, an
//   API pod reading its Secret and ConfigMap volumes, a pod on the CNI
//   bridge with an address from it;
// - exactly one kubelet and one containerd run on the whole guest, and one
//   pod sandbox per pod: no container of the source is left;
// - containerd's image blobs are the same files (same inodes: never
//   imported again);
// - `node status` exits 0 (kubelet's /healthz answers).
// - the release node status names is the one the step leaves;
// - after each move, kubelet's own checks: the Node's conditions (Ready, no
//   pressure) and no error it logs over and over for a minute (settled()).
// Times (TCG) are printed at the end: from the source's stop (its kubelet's
// unit, or its machine's, leaving active) until every pod is Ready again,
// against the same from the stack's own restart in the target mode.

import { join } from "node:path";
import $ from "dax";
import { assert, assertEquals } from "./support/assert.ts";
import { repoRoot } from "./support/sandbox.ts";
import { buildImage, type Vm, vmWithArtifact } from "./support/vm.ts";

const kubeletBin = Deno.env.get("KUBELET_BIN")!;
const apiserverBin = Deno.env.get("KUBE_APISERVER_BIN")!;
const stratumBin = Deno.env.get("STRATUM_BIN")!;
const kubectlBin = Deno.env.get("KUBECTL_BIN") ?? "kubectl";

const stratum = "/srv/payload/stratum";
/** The worker stack's releases: 1 installed, 2 an upgrade (the same stack built again). */
const bundles = { "1": "/srv/payload/kubelet-bundle", "2": "/srv/payload/kubelet-bundle-2" };
const bundle = bundles["1"];
type Version = keyof typeof bundles;
const kubectl = "/srv/payload/kubectl --kubeconfig /srv/payload/pki/admin.kubeconfig";
const blobs = "/var/lib/containerd/io.containerd.content.v1.content/blobs/sha256";
const pods = ["api-pod", "net-pod", "static-web-node-1"];
type Mode = "host" | "nspawn";

const times = new Map<string, number[]>();
const note = (what: string, ms: number) => times.set(what, [...(times.get(what) ?? []), ms]);

/** The CA, the apiserver's serving pair, the service-account keys, two client identities. */
async function makePki(dir: string): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  const p = (f: string) => join(dir, f);
  const openssl = (args: string[]) => $`openssl ${args}`.quiet();
  await openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"].concat(
    ["-subj", "/CN=stratum-test-kubernetes-ca", "-keyout", p("ca.key"), "-out", p("ca.crt")],
  ));
  const sign = async (name: string, subj: string, ext?: string) => {
    await openssl(["req", "-newkey", "rsa:2048", "-nodes", "-subj", subj].concat(
      ["-keyout", p(`${name}.key`), "-out", p(`${name}.csr`)],
    ));
    if (ext) await Deno.writeTextFile(p(`${name}.ext`), ext);
    await openssl(["x509", "-req", "-in", p(`${name}.csr`), "-CA", p("ca.crt")].concat(
      ["-CAkey", p("ca.key"), "-CAcreateserial", "-days", "2", "-out", p(`${name}.crt`)],
      ext ? ["-extfile", p(`${name}.ext`)] : [],
    ));
  };
  await sign(
    "apiserver",
    "/CN=kube-apiserver",
    "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,IP:10.99.0.1,DNS:kubernetes,DNS:kubernetes.default\n",
  );
  await sign("admin", "/O=system:masters/CN=admin");
  await sign("node", "/O=system:nodes/CN=system:node:node-1");
  await openssl(["genrsa", "-out", p("sa.key"), "2048"]);
  await openssl(["rsa", "-in", p("sa.key"), "-pubout", "-out", p("sa.pub")]);
  const b64 = async (f: string) =>
    btoa(String.fromCharCode(...new TextEncoder().encode(await Deno.readTextFile(p(f)))));
  const kubeconfig = async (user: string) =>
    `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: ${await b64("ca.crt")}
users:
- name: ${user}
  user:
    client-certificate-data: ${await b64(`${user}.crt`)}
    client-key-data: ${await b64(`${user}.key`)}
contexts:
- name: test
  context: {cluster: test, user: ${user}}
current-context: test
`;
  await Deno.writeTextFile(p("admin.kubeconfig"), await kubeconfig("admin"));
  await Deno.writeTextFile(p("node.kubeconfig"), await kubeconfig("node"));
}

/** The control plane and the node's network, as units of the guest (they come back after a power cut). */
const controlPlaneUnits = `
cat >/etc/systemd/system/test-net.service <<'EOF'
[Unit]
Description=a node address and a default route (kubelet will not take loopback)
DefaultDependencies=no
Before=network.target stratum-boot.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'ip link add dummy0 type dummy 2>/dev/null; ip addr replace 10.99.0.1/24 dev dummy0; ip link set dummy0 up; ip route replace default dev dummy0'
[Install]
WantedBy=multi-user.target
EOF
cat >/etc/systemd/system/test-cp-etcd.service <<'EOF'
[Unit]
Description=the control plane's etcd (not the node's stack)
After=test-net.service
StartLimitIntervalSec=0
[Service]
Restart=always
RestartSec=2
ExecStart=/usr/bin/etcd --name cp --data-dir /var/lib/test-cp-etcd --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 --initial-cluster cp=http://127.0.0.1:12380
[Install]
WantedBy=multi-user.target
EOF
cat >/etc/systemd/system/test-cp-apiserver.service <<'EOF'
[Unit]
Description=kube-apiserver (not the node's stack)
After=test-cp-etcd.service test-net.service
Wants=test-cp-etcd.service
# After a power cut its etcd comes back slowly under emulation: never give up.
StartLimitIntervalSec=0
[Service]
RestartSec=2
ExecStart=/srv/payload/kube-apiserver --etcd-servers=http://127.0.0.1:12379 --secure-port=6443 --advertise-address=10.99.0.1 --service-cluster-ip-range=10.96.0.0/16 --client-ca-file=/srv/payload/pki/ca.crt --tls-cert-file=/srv/payload/pki/apiserver.crt --tls-private-key-file=/srv/payload/pki/apiserver.key --service-account-key-file=/srv/payload/pki/sa.pub --service-account-signing-key-file=/srv/payload/pki/sa.key --service-account-issuer=https://kubernetes.default.svc --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --disable-admission-plugins=ServiceAccount --allow-privileged=true
Restart=always
[Install]
WantedBy=multi-user.target
EOF
systemctl daemon-reload
systemctl enable --now test-net.service test-cp-etcd.service test-cp-apiserver.service
`;

const podsYaml = `apiVersion: v1
kind: Secret
metadata: {name: s1, namespace: default}
stringData: {token: secret-token-1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: default}
data: {conf: config-1}
---
apiVersion: v1
kind: Pod
metadata: {name: api-pod, namespace: default}
spec:
  nodeName: node-1
  hostNetwork: true
  automountServiceAccountToken: false
  volumes:
  - {name: s, secret: {secretName: s1}}
  - {name: c, configMap: {name: c1}}
  containers:
  - name: c
    image: stratum.local/busybox:1
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 2 & wait; done"]
    volumeMounts: [{name: s, mountPath: /s}, {name: c, mountPath: /c}]
    readinessProbe: {exec: {command: ["/bin/cat", "/s/token", "/c/conf"]}, periodSeconds: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: net-pod, namespace: default}
spec:
  nodeName: node-1
  automountServiceAccountToken: false
  containers:
  - name: c
    image: stratum.local/busybox:1
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 2 & wait; done"]
    readinessProbe: {exec: {command: ["/bin/cat", "/sys/class/net/eth0/address"]}, periodSeconds: 2}
`;

const staticPod = `apiVersion: v1
kind: Pod
metadata: {name: static-web, namespace: default}
spec:
  hostNetwork: true
  containers:
  - name: c
    image: stratum.local/busybox:1
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 2 & wait; done"]
`;

/**
 * Which tests run: KUBELET_TESTS=upgrade (the install, an upgrade and a
 * rollback in host mode), crash (the install, then the crash steps that
 * end the whole chain and a move into nspawn mode), nspawn-install, or
 * all (unset).
 */
const only = Deno.env.get("KUBELET_TESTS");

/**
 * A booted VM with the control plane up and the node's credentials
 * provisioned under /var/lib/kubelet, as cloud-init or `kubeadm join` would
 * before the first install; nothing of stratum's installed.
 */
async function provisionedVm(): Promise<Vm> {
  const vmImage = await buildImage();
  const vm = await vmWithArtifact(vmImage.dir, stratumBin, async (payload) => {
    for (const v of ["1", "2"] as const) {
      const built = await new Deno.Command("bash", {
        args: [
          join(repoRoot, "examples/node-stack/build.sh"),
          join(payload, bundles[v].split("/").pop()!),
          v,
        ],
        env: { STRATUM: stratumBin, KUBELET: kubeletBin },
        stdout: "null",
        stderr: "piped",
      }).output();
      assertEquals(built.code, 0, new TextDecoder().decode(built.stderr));
    }
    await Deno.copyFile(apiserverBin, join(payload, "kube-apiserver"));
    const kc = (await $`which ${kubectlBin}`.text()).trim();
    await Deno.copyFile(await Deno.realPath(kc), join(payload, "kubectl"));
    await makePki(join(payload, "pki"));
  });
  try {
    await vm.boot();
    await vm.sh(controlPlaneUnits);
    await vm.sh(
      "mkdir -p /var/lib/kubelet/pki /var/lib/kubelet/static-pods && " +
        "cp /srv/payload/pki/node.kubeconfig /var/lib/kubelet/kubeconfig && " +
        "cp /srv/payload/pki/ca.crt /var/lib/kubelet/pki/ca.crt && chmod 600 /var/lib/kubelet/kubeconfig",
    );
    await vm.sh(`cat >/var/lib/kubelet/static-pods/static-web.yaml <<'EOF'\n${staticPod}EOF`);
    await waitFor(vm, "the apiserver answers", `${kubectl} get --raw /readyz`, 300_000);
    return vm;
  } catch (e) {
    await vm[Symbol.asyncDispose]();
    throw e;
  }
}

/** A step of a chain: on failure, what the guest shows is printed first. */
const stager = (t: Deno.TestContext, vm: Vm) => (name: string, f: () => Promise<void>) =>
  t.step(name, async () => {
    try {
      await f();
    } catch (e) {
      console.error(`${name}: failed; the guest:\n${await evidence(vm)}`);
      throw e;
    }
  });

/**
 * `node install` in `node.mode`, adopting the provisioned /var/lib/kubelet:
 * the Node Ready, the pods applied and every pod Ready, the node whole;
 * the image blobs' inodes kept in `node` for every later step.
 */
async function install(vm: Vm, node: { mode: Mode; inodes: string; version: Version }) {
  const since = await now(vm);
  const r = await vm.exec([
    stratum,
    "node",
    "install",
    "--mode",
    node.mode,
    "--bundle",
    bundle,
    "--node",
    "node-1",
    "--adopt-state",
    "/var/lib/kubelet",
  ]);
  assertEquals(r.code, 0, `${r.stdout}${r.stderr}`);
  await waitFor(vm, "Node Ready", nodeReady, 300_000);
  // Applied until the apiserver takes them: /readyz answers before its
  // own controllers have made the default namespace on a loaded guest.
  await waitFor(vm, "the pods applied", `${kubectl} apply -f - <<'EOF'\n${podsYaml}EOF`, 300_000);
  const t0 = performance.now();
  await waitFor(vm, "every pod Ready", allReady(since), 300_000);
  note(`install in ${node.mode} mode: pods applied → every pod Ready`, performance.now() - t0);
  node.inodes = await vm.sh(`ls -i ${blobs} | sort`);
  await whole(vm, node, `after install in ${node.mode} mode`);
  if (node.mode === "nspawn") {
    await settled(vm, "nspawn", JSON.parse(await vm.sh("cat /etc/stratum/node.json")).slot);
  }
}

/** The times noted, one line each. */
function printTimes(): void {
  for (const [what, ms] of times) {
    console.error(
      `real kubelet (TCG): ${what}: ${ms.map((m) => (m / 1000).toFixed(1)).join(", ")} s`,
    );
  }
}

Deno.test({
  name:
    "a real kubelet installed in nspawn mode: Node Ready, every pod Ready, kubelet's checks pass",
  ignore: only !== undefined && only !== "nspawn-install",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    await using vm = await provisionedVm();
    const node = { mode: "nspawn" as Mode, inodes: "", version: "1" as Version };
    await stager(t, vm)(
      "node install in nspawn mode adopting /var/lib/kubelet: Node Ready, pods Ready",
      () => install(vm, node),
    );
    printTimes();
  },
});

Deno.test({
  name:
    "a real kubelet registered with a real apiserver: installed in host mode, moved to nspawn " +
    "and back; Node Ready, every pod Ready, one kubelet, images kept",
  ignore: only === "nspawn-install",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    await using vm = await provisionedVm();
    const node = { mode: "host" as Mode, inodes: "", version: "1" as Version };
    const stage = stager(t, vm);
    await stage(
      "node install in host mode adopting /var/lib/kubelet: Node Ready, pods Ready",
      () => install(vm, node),
    );

    /**
     * A move killed (SIGKILL) or cut off (power) right after `step` is
     * recorded, then `migrate resume` or a boot with no command: before
     * `awaiting-ready` back in the source mode, from it on in the target's,
     * with every pod Ready again from a container started since.
     */
    const crash = async (step: string, how: "kill" | "power") => {
      const from = node.mode;
      const to: Mode = from === "host" ? "nspawn" : "host";
      const finishes = ["awaiting-ready", "ready", "complete"].includes(step);
      const since = await now(vm);
      const r = await vm.exec(
        [stratum, "migrate", "run", "--to", to, "--bundle", bundles[node.version], "--json"],
        { env: { STRATUM_FAILPOINT: `kill-after-record:${step}` } },
      );
      assertEquals(r.code, 137, `killed after ${step}: ${r.stderr}`);
      if (how === "kill") {
        const resumed = await vm.exec([stratum, "migrate", "resume", "--json"]);
        assertEquals(
          [resumed.code, JSON.parse(resumed.stdout || "{}").outcome],
          finishes ? [0, "complete"] : [1, "rolled-back"],
          resumed.stderr,
        );
      } else {
        await vm.powerCut();
        await vm.boot();
        await waitFor(
          vm,
          "stratum-boot.service done",
          "! systemctl is-active -q stratum-boot.service && exit 1; " +
            '[ "$(systemctl show -P SubState stratum-boot.service)" = exited ]',
          600_000,
        );
      }
      const journal = JSON.parse(await vm.sh("cat /var/lib/stratum/migration.json")).step;
      assertEquals(journal, finishes ? "complete" : "rolled-back", `${how} after ${step}`);
      if (finishes) node.mode = to;
      await waitFor(vm, "Node Ready", nodeReady, 300_000);
      // A kill right after stopping-source is recorded may come before the
      // stop: the source's pods may never have stopped, so their start time
      // proves nothing; whole() counts the running pods on the guest.
      const restarted = how === "power" || finishes;
      await waitFor(vm, "every pod Ready", allReady(restarted ? since : ""), 300_000);
      await whole(vm, node, `${how} after ${step}, ${from} → ${to}`);
      assertEquals((await vm.exec([stratum, "migrate", "ack"])).code, 0);
    };

    /** `node upgrade` to release 2 or `node rollback` to 1, in the node's mode. */
    const change = async (how: "upgrade" | "rollback") => {
      const since = await now(vm);
      const r = await vm.exec(
        how === "upgrade"
          ? [stratum, "node", "upgrade", "--bundle", bundles["2"], "--json"]
          : [stratum, "node", "rollback", "--json"],
      );
      assertEquals(r.code, 0, `${r.stdout}${r.stderr}`);
      assertEquals(JSON.parse(r.stdout).outcome, "complete");
      node.version = how === "upgrade" ? "2" : "1";
      await waitFor(vm, "Node Ready", nodeReady, 300_000);
      await waitFor(vm, "every pod Ready", allReady(since), 300_000);
      await whole(vm, node, `after node ${how} in ${node.mode} mode`);
      assertEquals((await vm.exec([stratum, "migrate", "ack"])).code, 0);
    };

    const move = async (to: Mode) => {
      const from = node.mode;
      const source = mainUnit(from, JSON.parse(await vm.sh("cat /etc/stratum/node.json")).slot);
      const since = await now(vm);
      const t0 = performance.now();
      const r = await vm.exec([
        stratum,
        "migrate",
        "run",
        "--to",
        to,
        "--bundle",
        bundles[node.version],
        "--json",
      ]);
      assertEquals(r.code, 0, `${r.stdout}${r.stderr}`);
      assertEquals(JSON.parse(r.stdout).outcome, "complete");
      note(`migrate → ${to}: run`, performance.now() - t0);
      // Its step lines, each with the time since the run started: where
      // the downtime goes between the source's stop and the target's start.
      console.error(
        `migrate → ${to}, its steps:\n${
          r.stderr.split("\n").filter((l) => /^\[\s*[\d.]+ s\]/.test(l)).join("\n")
        }`,
      );
      await waitFor(vm, "Node Ready", nodeReady, 300_000);
      const ready = await waitFor(vm, "every pod Ready", allReady(since), 300_000);
      note(`migrate → ${to}: run start → every pod Ready`, performance.now() - t0);
      note(`migrate → ${to}: source stopped → every pod Ready`, await downSince(vm, source, ready));
      node.mode = to;
      await whole(vm, node, `after migrate → ${to}`);
      await settled(vm, to, JSON.parse(await vm.sh("cat /etc/stratum/node.json")).slot);
      assertEquals((await vm.exec([stratum, "migrate", "ack"])).code, 0);
      // The stack's own restart in the target mode, its pods stopped too (as
      // a move stops them; in nspawn mode they die with the machine), for
      // the ratio, measured the same way.
      const slot = JSON.parse(await vm.sh("cat /etc/stratum/node.json")).slot;
      const since1 = await now(vm);
      await vm.sh(
        `systemctl stop stratum-${slot}.target; systemctl stop kubepods.slice 2>/dev/null; ` +
          `systemctl start stratum-${slot}.target`,
      );
      const ready1 = await waitFor(vm, "every pod Ready", allReady(since1), 300_000);
      note(
        `restart in ${to}: stopped → every pod Ready`,
        await downSince(vm, mainUnit(to, slot), ready1),
      );
      await whole(vm, node, `after a restart in ${to}`);
    };
    if (only === "upgrade") {
      // The upgrade and rollback in host mode alone, after the install (a quick chain).
      await stage(
        "node upgrade in host mode to release 2: every pod Ready",
        () => change("upgrade"),
      );
      await stage(
        "node rollback in host mode to release 1: every pod Ready",
        () => change("rollback"),
      );
      return;
    }
    const crashes = async () => {
      await stage(
        "a power cut after awaiting-ready, host → nspawn: the boot completes it, every pod Ready",
        () => crash("awaiting-ready", "power"),
      );
      await stage(
        "SIGKILL after awaiting-ready, nspawn → host: resume completes it, every pod Ready in host mode",
        () => crash("awaiting-ready", "kill"),
      );
      await stage(
        "a power cut after stopping-source, host → nspawn: the boot rolls back to host, every pod Ready",
        () => crash("stopping-source", "power"),
      );
    };
    if (only === "crash") {
      // The last steps of the whole chain, right after the install (a quicker
      // chain), then a move into nspawn mode for a second downtime figure.
      await crashes();
      await stage(
        "migrate → nspawn: Node Ready, every pod Ready, one kubelet, images kept",
        () => move("nspawn"),
      );
      printTimes();
      return;
    }
    await stage(
      "SIGKILL after stopping-source, host → nspawn: resume rolls back, every pod Ready in host mode",
      () => crash("stopping-source", "kill"),
    );
    await stage("node upgrade in host mode to release 2: every pod Ready", () => change("upgrade"));
    await stage(
      "node rollback in host mode to release 1: every pod Ready",
      () => change("rollback"),
    );
    await stage(
      "migrate → nspawn: Node Ready, every pod Ready, one kubelet, images kept",
      () => move("nspawn"),
    );
    await stage(
      "node upgrade in nspawn mode to release 2: every pod Ready",
      () => change("upgrade"),
    );
    await stage(
      "migrate → host: Node Ready, every pod Ready, one kubelet, images kept",
      () => move("host"),
    );
    await crashes();
    printTimes();
  },
});

const nodeReady =
  `${kubectl} get node node-1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -qx True`;

/**
 * Every pod Running and Ready (the static pod's mirror included), its
 * container started at or after `since` (the guest's UTC time, RFC 3339):
 * right after a stop the apiserver still holds the pods' old status, so a
 * Ready from before the step proves nothing.
 */
const allReady = (since: string) =>
  `out=$(${kubectl} get pods -o jsonpath='{range .items[*]}{.metadata.name} ` +
  `{.status.phase} {.status.conditions[?(@.type=="Ready")].status} ` +
  `{.status.containerStatuses[0].state.running.startedAt}{"\\n"}{end}'); ` +
  `for p in ${pods.join(" ")}; do set -- $(echo "$out" | grep "^$p "); ` +
  `[ "$2 $3" = "Running True" ] || exit 1; expr "$4" ">=" "${since}" >/dev/null || exit 1; done; ` +
  `cut -d' ' -f1 /proc/uptime`;

/**
 * The unit whose stop is the source's stop: its kubelet's in host mode, its
 * machine's in nspawn mode (kubelet goes down with it).
 */
const mainUnit = (mode: Mode, slot: string) =>
  mode === "host" ? `stratum-${slot}-kubelet.service` : `stratum-${slot}-machine.service`;

/**
 * Milliseconds from `unit`'s last stop (systemd's "Stopping" line in the
 * guest's journal, on its monotonic clock: the unit itself is gone once a
 * move removed the source slot) to `readyAt` (the guest's uptime, in
 * seconds, when every pod was seen Ready).
 */
async function downSince(vm: Vm, unit: string, readyAt: string): Promise<number> {
  const line = await vm.sh(
    `journalctl -b -u ${unit} -o short-monotonic --no-pager | grep -F 'Stopping' | tail -1`,
  );
  const stopped = /^\[\s*([\d.]+)\]/.exec(line.trim())?.[1];
  assert(stopped !== undefined, `${unit}: its stop in the guest's journal: ${line}`);
  return (Number(readyAt.trim().split("\n").at(-1)) - Number(stopped)) * 1000;
}

/**
 * kubelet's own checks after a move, as issue 37 asks: the Node's
 * conditions (Ready, no pressure), and over the next minute no error that
 * kubelet keeps logging: an error line (klog's `E` lines) more than 5 times
 * with the same message is a loop, not a start-up hiccup. The distinct
 * error messages are printed either way.
 */
async function settled(vm: Vm, mode: Mode, slot: string): Promise<void> {
  const conditions = await vm.sh(
    `${kubectl} get node node-1 -o jsonpath='{range .status.conditions[*]}{.type}={.status} {end}'`,
  );
  assertEquals(
    conditions.trim().split(" ").sort(),
    ["DiskPressure=False", "MemoryPressure=False", "PIDPressure=False", "Ready=True"],
    `${mode}: the Node's conditions`,
  );
  const since = (await vm.sh("date -u '+%Y-%m-%d %H:%M:%S'")).trim();
  await new Promise((r) => setTimeout(r, 60_000));
  const log = await vm.sh(
    `journalctl -u ${mainUnit(mode, slot)} --since '${since}' -o cat --no-pager | ` +
      `grep -oE 'E[0-9]{4} [0-9:.]+ +[0-9]+ [^ ]+\] .*' | sed -E 's/^[^]]*\] //' | ` +
      "sort | uniq -c | sort -rn || true",
  );
  console.error(`kubelet in ${mode} mode, errors logged over a minute:\n${log.trim() || "(none)"}`);
  const worst = Number(log.trim().split("\n")[0]?.trim().split(" ")[0] ?? 0) || 0;
  assert(worst <= 5, `${mode}: kubelet logs the same error ${worst} times a minute:\n${log}`);
}

/** kubelet's /healthz?verbose, asked once for up to 20 s: its checks, and how long it took. */
async function healthzVerbose(vm: Vm): Promise<string> {
  const py = "import time, urllib.request as u\n" +
    "t = time.time()\n" +
    "try:\n" +
    "  r = u.urlopen('http://127.0.0.1:10248/healthz?verbose', timeout=20); b = r.read().decode()\n" +
    "except Exception as e:\n" +
    "  b = repr(e)\n" +
    "print('%.1f s: %s' % (time.time() - t, ' '.join(b.split())))";
  const r = await vm.exec(["python3", "-c", py], { timeoutMs: 30_000 }).catch((e) => ({
    stdout: String(e),
  }));
  const listening = await vm.sh(
    "ss -ltnp 2>/dev/null | grep -E ':10248 ' || echo 'nothing listens on 10248'",
  )
    .catch(String);
  return `${r.stdout.trim()}; ${listening.trim()}`;
}

/** The guest's time now, as the apiserver writes it (RFC 3339, UTC, seconds). */
const now = (vm: Vm) => vm.sh("date -u +%Y-%m-%dT%H:%M:%SZ").then((s) => s.trim());

/** Runs `script` every 2 s until it passes; returns what it printed then. */
async function waitFor(vm: Vm, what: string, script: string, limitMs: number): Promise<string> {
  const t0 = performance.now();
  let last = "";
  for (;;) {
    const r = await vm.exec(["sh", "-c", script], { timeoutMs: 60_000 });
    if (r.code === 0) return r.stdout;
    last = `${r.stdout}${r.stderr}`;
    if (performance.now() - t0 > limitMs) {
      throw new Error(`${what}: not after ${limitMs / 1000} s: ${last}\n${await evidence(vm)}`);
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

/**
 * The node whole in its mode and release: one kubelet and containerd, one
 * sandbox per pod, the same blobs, healthy, the release node status names.
 */
async function whole(
  vm: Vm,
  node: { mode: Mode; inodes: string; version: Version },
  label: string,
): Promise<void> {
  const { mode, inodes } = node;
  const st = JSON.parse(await vm.sh("cat /etc/stratum/node.json"));
  assertEquals(st.mode, mode, `${label}: node.json`);
  // pgrep -c exits 1 when it counts 0: the output is what is read.
  const counts = (await vm.exec([
    "sh",
    "-c",
    "pgrep -c -x kubelet; pgrep -c -x containerd; pgrep -c -f '^/bin/sh -c trap \"exit 0\" TERM INT'",
  ])).stdout;
  assertEquals(
    counts.trim().split("\n"),
    ["1", "1", String(pods.length)],
    `${label}: one kubelet, one containerd, one pod sandbox per pod: ${await vm
      .sh("ps -eo pid,cgroup:70,args | grep -E 'kubelet|containerd|exit 0' | grep -v grep")
      .catch(String)}`,
  );
  assertEquals(await vm.sh(`ls -i ${blobs} | sort`), inodes, `${label}: the same image blobs`);
  const ip = await vm.sh(`${kubectl} get pod net-pod -o jsonpath='{.status.podIP}'`);
  assert(ip.startsWith("10.244.0."), `${label}: the CNI pod's address: ${ip}`);
  // Its health (kubelet's /healthz) is asked for 5 s; the emulated guest
  // can take longer to answer under load, so it is asked again for a minute.
  let ns = await vm.exec([stratum, "node", "status", "--json"]);
  for (const t0 = performance.now(); ns.code !== 0 && performance.now() - t0 < 60_000;) {
    console.error(
      `${label}: node status answered late: ${ns.stdout.replace(/\s+/g, " ").slice(-300)}; ` +
        `kubelet's /healthz?verbose asked for 20 s: ${await healthzVerbose(vm)}`,
    );
    await new Promise((r) => setTimeout(r, 3000));
    ns = await vm.exec([stratum, "node", "status", "--json"]);
  }
  assertEquals(ns.code, 0, `${label}: node status: ${ns.stdout}${ns.stderr}`);
  assertEquals(
    JSON.parse(ns.stdout).running?.version,
    node.version,
    `${label}: the release that runs`,
  );
}

async function evidence(vm: Vm): Promise<string> {
  const r = await vm.exec([
    "sh",
    "-c",
    `systemctl status test-cp-etcd test-cp-apiserver --no-pager 2>&1 | tail -20; ` +
    `systemctl status 'stratum-*' 'test-*' --no-pager 2>&1 | tail -40; ` +
    `journalctl -u 'stratum-*' --no-pager 2>&1 | grep -iE 'error|fail' | tail -40; ` +
    `${kubectl} get nodes,pods -o wide 2>&1; ${kubectl} describe pods 2>&1 | tail -40`,
  ]).catch((e) => ({ code: -1, stdout: String(e), stderr: "" }));
  return r.stdout;
}
