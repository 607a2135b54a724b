// Quoting for values written into systemd unit files. One place, because the
// rules differ by setting and a wrong one is silent: in ExecStart= systemd
// expands specifiers (%) and variables ($), in Environment= only specifiers;
// a newline ends the setting in both, so it is refused, never written.

/** A value a unit file cannot carry: it holds a newline or a NUL. */
export class ErrUnitValue extends Error {
  override name = "ErrUnitValue";
}

function check(s: string): void {
  if (/[\n\r\0]/.test(s)) {
    throw new ErrUnitValue(`A unit file cannot carry ${JSON.stringify(s)}: it holds a line break`);
  }
}

function quoted(escaped: string, plain: RegExp): string {
  return plain.test(escaped)
    ? escaped
    : `"${escaped.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/** One ExecStart= argument, literal: `%` and `$` escaped, quoted when it needs it. */
export function quoteExecArg(arg: string): string {
  check(arg);
  return quoted(arg.replaceAll("%", "%%").replaceAll("$", () => "$$"), /^[A-Za-z0-9_./:=@%+,$-]+$/);
}

/** One Environment= assignment (`K=V`), literal: `%` escaped (no `$` expansion there). */
export function quoteEnvAssignment(kv: string): string {
  check(kv);
  return quoted(kv.replaceAll("%", "%%"), /^[A-Za-z0-9_./:=@%+,-]+$/);
}
