// Discovery: /version, /api, /apis and the resource lists kubectl reads
// before any request (docs/kubectl-wire.md).

import { json } from "./responses.ts";

/** The answer to a discovery path, or undefined when `path` is not one. */
export function discovery(path: string, minor: string): Response | undefined {
  switch (path) {
    case "/version":
      return json({
        major: "1",
        minor,
        gitVersion: `v1.${minor}.0`,
        platform: "linux/amd64",
      });
    case "/api":
      return json({
        kind: "APIVersions",
        versions: ["v1"],
        serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "127.0.0.1" }],
      });
    case "/apis": {
      const v = { groupVersion: "apps/v1", version: "v1" };
      const policy = { groupVersion: "policy/v1", version: "v1" };
      return json({
        kind: "APIGroupList",
        apiVersion: "v1",
        groups: [
          { name: "apps", versions: [v], preferredVersion: v },
          { name: "policy", versions: [policy], preferredVersion: policy },
        ],
      });
    }
    case "/api/v1": {
      const list = resourceList("v1", [
        ["namespaces", "Namespace", false, ["ns"]],
        ["nodes", "Node", false, ["no"]],
        ["pods", "Pod", true, ["po"]],
      ]);
      // The eviction subresource, as drain looks for it: group policy, version v1.
      list.resources.push({
        name: "pods/eviction",
        singularName: "",
        namespaced: true,
        kind: "Eviction",
        verbs: ["create"],
        shortNames: [],
        group: "policy",
        version: "v1",
      } as never);
      return json(list);
    }
    case "/apis/policy/v1":
      return json(
        resourceList("policy/v1", [["poddisruptionbudgets", "PodDisruptionBudget", true, ["pdb"]]]),
      );
    case "/apis/apps/v1":
      return json(resourceList("apps/v1", [
        ["deployments", "Deployment", true, ["deploy"]],
        ["daemonsets", "DaemonSet", true, ["ds"]],
      ]));
  }
  return undefined;
}

function resourceList(groupVersion: string, rs: [string, string, boolean, string[]][]) {
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion,
    resources: rs.map(([name, kind, namespaced, shortNames]) => ({
      name,
      singularName: kind.toLowerCase(),
      namespaced,
      kind,
      verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
      shortNames,
    })),
  };
}
