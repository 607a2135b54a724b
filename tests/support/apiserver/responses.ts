// The apiserver's answers: JSON bodies and Status objects in its own words.

import type { LoggedRequest } from "./types.ts";

export function json(body: unknown, code = 200): Response {
  return new Response(JSON.stringify(body), {
    status: code,
    headers: { "content-type": "application/json" },
  });
}

export function status(code: number, reason: string, message: string): Response {
  return json({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  }, code);
}

export const methodNotAllowed = () => status(405, "MethodNotAllowed", "method not allowed");

/** 403 in the apiserver's words: `deployments.apps "x" is forbidden: User ... cannot patch ...`. */
export function forbidden(r: LoggedRequest): Response {
  const m = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/.exec(r.path);
  const [ns, resource, name] = m ? [m[1]!, m[2]!, m[3]] : ["", "namespaces", undefined];
  const verb = r.method === "PATCH"
    ? "patch"
    : r.query.watch === "true"
    ? "watch"
    : name
    ? "get"
    : "list";
  const what = name ? `${resource}.apps "${name}"` : `${resource}.apps`;
  return status(
    403,
    "Forbidden",
    `${what} is forbidden: User "system:serviceaccount:default:limited" cannot ${verb} resource "${resource}" in API group "apps" in the namespace "${ns}"`,
  );
}

export function notFound(group: string, resource: string, name: string): Response {
  const qualified = group ? `${resource}.${group}` : resource;
  return json({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: `${qualified} "${name}" not found`,
    reason: "NotFound",
    details: { name, group: group || undefined, kind: resource },
    code: 404,
  }, 404);
}

/** JSON merge, which is what a strategic merge patch of maps does. */
export function merge(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch;
  const out = (typeof target === "object" && target !== null && !Array.isArray(target))
    ? { ...(target as Record<string, unknown>) }
    : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = merge(out[k], v);
  }
  return out;
}
