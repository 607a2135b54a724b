// One example (or a few) for every command's --help, in one place: docs/cli.md
// promises them, and tests/cli_contract_test.ts checks every command has one.

/** Command path ("migrate run") → example command lines. */
export const examples: Readonly<Record<string, readonly string[]>> = {
  "rollout commands": ["stratum rollout commands --kubeconfig /etc/stratum/admin.conf"],
  "rollout list": ["stratum rollout list --json"],
  "rollout owned": [
    "stratum rollout owned deploy coredns -n kube-system",
    "stratum rollout owned DaemonSet cilium -n kube-system --json",
  ],
  "migrate plan": ["stratum migrate plan --to nspawn --bundle /srv/stratum-bundle"],
  "migrate run": [
    "stratum migrate run --to nspawn --bundle /srv/stratum-bundle --json",
    "stratum migrate run --to host --strategy reprovision --bundle /srv/stratum-bundle",
  ],
  "migrate resume": ["stratum migrate resume --json"],
  "migrate status": ["stratum migrate status --json"],
  "migrate ack": ["stratum migrate ack --json"],
  "node boot": ["systemctl status stratum-boot.service   # what runs it at every boot"],
  "bundle make": ["stratum bundle make /srv/bundle --version 1.2.0"],
  "bundle sign": ["stratum bundle sign /srv/bundle --key signing.pem"],
  "bundle verify": [
    "stratum bundle verify /srv/bundle --mode nspawn --json",
    "stratum bundle verify /var/lib/stratum/bundles   # the node's installed copies",
  ],
};
