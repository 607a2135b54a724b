/**
 * Mutation testing: puts one plausible bug at a time into lib/migrate,
 * lib/rollout, lib/kube and lib/host, runs the fast tests
 * that cover that code, and reports each mutant that no test noticed.
 *
 * Operators (one change per mutant): flip an equality, swap && and ||, move
 * a relational boundary, flip a boolean literal, negate an `if` condition,
 * delete a call statement, swap two adjacent `await` statements (the write-
 * ahead order), move a small integer constant by one, widen an `instanceof`
 * check to `Error`, drop one string from an argument list (an argv given to
 * an external program), and pass `undefined` for one argument where an
 * error is made (a step or action name lost when an error is wrapped). Text
 * inside string literals and comments is left alone.
 *
 * Each mutant runs in its own copy of the repository (workers side by side),
 * with `deno test --no-check --fail-fast`: a mutant that no longer parses is
 * "invalid" and not scored, one whose tests time out counts as killed.
 *
 * Usage: deno task mutate [--workers N] [--only PATH_SUBSTRING] [--json FILE]
 *
 * StrykerJS was the first choice. Of its runners only the command runner can
 * start `deno test`, and it is "best effort" (its own words): it switches
 * mutants through the __STRYKER_ACTIVE_MUTANT__ environment variable and
 * runs the one configured command for every mutant, with no per-file test
 * selection and no per-test coverage, so each mutant would pay for the fast
 * tests of every area (rollout's run the real kubectl). This script knows
 * which tests cover which file and stops at the first failing test.
 *
 * @module
 */

const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** Which fast tests cover which code. */
const suites: { files: RegExp; tests: string[] }[] = [
  {
    files: /^lib\/migrate\//,
    tests: [
      "tests/migrate_matrix_test.ts",
      "tests/journal_store_test.ts",
      "tests/reprovision_test.ts",
      "tests/host_test.ts",
      "tests/errors_test.ts",
    ],
  },
  {
    files: /^lib\/host\/durable_file\.ts$/,
    tests: [
      "tests/durable_file_test.ts",
      "tests/journal_store_test.ts",
      "tests/host_test.ts",
      "tests/migrate_matrix_test.ts",
    ],
  },
  {
    files: /^lib\/host\/(?!durable_file\.ts$)/,
    tests: [
      "tests/host_test.ts",
      "tests/lock_test.ts",
      "tests/unit_quote_test.ts",
      "tests/trust_boundary_test.ts",
      "tests/exec_test.ts",
    ],
  },
  {
    files: /^lib\/(rollout|kube)\//,
    tests: [
      "tests/rollout_truth_test.ts",
      "tests/rollout_test.ts",
      "tests/rollout_cli_test.ts",
    ],
  },
];

const targets = [
  ...listTs("lib/migrate"),
  ...listTs("lib/rollout"),
  ...listTs("lib/kube"),
  ...listTs("lib/host"),
].filter((f) => !f.endsWith("/mod.ts"));

export interface Mutant {
  readonly file: string;
  /** 1-based. */
  readonly line: number;
  readonly operator: string;
  readonly before: string;
  readonly after: string;
  /** The whole file, mutated. */
  readonly text: string;
}

type Outcome = "killed" | "survived" | "invalid" | "timeout";

function listTs(dir: string): string[] {
  return [...Deno.readDirSync(`${root}/${dir}`)]
    .filter((e) => e.isFile && e.name.endsWith(".ts"))
    .map((e) => `${dir}/${e.name}`)
    .sort();
}

/** The line with string literals' contents and trailing comments blanked out. */
export function mask(line: string): string {
  let out = "";
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === "\\") {
        out += "  ";
        i++;
        continue;
      }
      if (c === quote) {
        quote = undefined;
        out += c;
      } else out += " ";
      continue;
    }
    if (c === "/" && line[i + 1] === "/") return out + " ".repeat(line.length - i);
    if (c === '"' || c === "'" || c === "`") quote = c;
    out += c;
  }
  return out;
}

const swaps: [RegExp, string, string][] = [
  [/===/g, "!==", "flip equality"],
  [/!==/g, "===", "flip equality"],
  [/&&/g, "||", "swap logical"],
  [/\|\|/g, "&&", "swap logical"],
  [/ < /g, " <= ", "boundary"],
  [/ <= /g, " < ", "boundary"],
  [/ > /g, " >= ", "boundary"],
  [/ >= /g, " > ", "boundary"],
  [/\btrue\b/g, "false", "flip boolean"],
  [/\bfalse\b/g, "true", "flip boolean"],
];

const callStatement = /^\s*(await\s+)?[\w$#.[\]!?]+(\.[\w$#]+)*\(.*\);\s*$/;
const awaitStatement = /^\s*await\s.*;\s*$/;

/** Every mutant of one file's text. */
export function mutants(file: string, text: string): Mutant[] {
  const lines = text.split("\n");
  const out: Mutant[] = [];
  const add = (i: number, operator: string, after: string | string[]) => {
    const next = [...lines];
    const replaced = Array.isArray(after) ? after : [after];
    next.splice(i, replaced.length === 2 ? 2 : 1, ...replaced);
    out.push({
      file,
      line: i + 1,
      operator,
      before: lines.slice(i, i + replaced.length).join("\n"),
      after: replaced.join("\n"),
      text: next.join("\n"),
    });
  };
  let inBlockComment = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const t = line.trim();
    if (inBlockComment) {
      if (t.includes("*/")) inBlockComment = false;
      continue;
    }
    if (t.startsWith("/*")) {
      inBlockComment = !t.includes("*/");
      continue;
    }
    if (
      t === "" || t.startsWith("//") || t.startsWith("import ") || t.startsWith("export type") ||
      t.startsWith("export {") || t.startsWith("readonly ") || t.startsWith("type ") ||
      t.startsWith("| ")
    ) continue;
    const m = mask(line);
    for (const [re, to, operator] of swaps) {
      for (const hit of m.matchAll(re)) {
        const at = hit.index!;
        add(i, operator, line.slice(0, at) + to + line.slice(at + hit[0].length));
      }
    }
    for (const hit of m.matchAll(/(?<![\w.$])([0-9])(?![\w.])/g)) {
      const at = hit.index!;
      const n = Number(hit[1]);
      for (const v of [n + 1, n - 1].filter((v) => v >= 0)) {
        add(i, "constant", line.slice(0, at) + v + line.slice(at + 1));
      }
    }
    const cond = /^(\s*(?:\} else )?if )\((.*)\)( \{| return\b.*| continue;| break;| throw\b.*)$/
      .exec(
        line,
      );
    if (cond && balanced(cond[2]!)) {
      add(i, "negate if", `${cond[1]}(!(${cond[2]}))${cond[3]}`);
    }
    if (callStatement.test(line) && balanced(mask(line))) {
      add(i, "delete call", line.replace(/\S.*$/, "/* deleted */;"));
    }
    for (const hit of m.matchAll(/\binstanceof ([\w$.]+)/g)) {
      if (hit[1] === "Error") continue;
      const at = hit.index! + "instanceof ".length;
      add(i, "widen instanceof", line.slice(0, at) + "Error" + line.slice(at + hit[1]!.length));
    }
    // One string dropped from a bracketed list of them (an argv, a flag list).
    if (/\[\s*["'`]/.test(line) || /^\s*["'`][^"'`]*["'`],\s*$/.test(line)) {
      for (const hit of line.matchAll(/("[^"\\]*"|'[^'\\]*'|`[^`\\$]*`),\s?/g)) {
        const at = hit.index!;
        if (mask(line).slice(at, at + 1) !== line[at]) continue; // inside a string or comment
        add(i, "drop argument", line.slice(0, at) + line.slice(at + hit[0].length));
      }
    }
    // One argument of a new error passed as undefined.
    for (const hit of m.matchAll(/\bnew ([\w$.]*(?:Error|Err[A-Z]\w*))\(/g)) {
      const open = hit.index! + hit[0].length;
      const args = topLevelArgs(line, open);
      if (!args || args.length < 2) continue;
      for (const [from, to] of args) {
        if (line.slice(from, to).trim() === "undefined") continue;
        add(i, "error field dropped", line.slice(0, from) + "undefined" + line.slice(to));
      }
    }
    const next = lines[i + 1];
    if (
      next !== undefined && awaitStatement.test(line) && awaitStatement.test(next) &&
      indent(line) === indent(next)
    ) {
      add(i, "swap statements", [next, line]);
    }
  }
  return out;
}

/** The [start, end) spans of the top-level arguments from `open` (after "(") to the closing ")", on one line. */
function topLevelArgs(line: string, open: number): [number, number][] | undefined {
  const m = mask(line);
  const spans: [number, number][] = [];
  let depth = 0;
  let start = open;
  for (let j = open; j < m.length; j++) {
    const c = m[j];
    if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") {
      if (depth === 0) {
        if (line.slice(start, j).trim() !== "") spans.push(trimSpan(line, start, j));
        return spans;
      }
      depth--;
    } else if (c === "," && depth === 0) {
      spans.push(trimSpan(line, start, j));
      start = j + 1;
    }
  }
  return undefined; // the call goes on past this line
}

function trimSpan(line: string, from: number, to: number): [number, number] {
  while (from < to && line[from] === " ") from++;
  while (to > from && line[to - 1] === " ") to--;
  return [from, to];
}

function indent(s: string): number {
  return s.length - s.trimStart().length;
}

function balanced(s: string): boolean {
  let depth = 0;
  for (const c of mask(s)) {
    if (c === "(") depth++;
    if (c === ")" && --depth < 0) return false;
  }
  return depth === 0;
}

/** A copy of the repository for one worker, without .git and the Deno install. */
async function workerCopy(n: number): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: `stratum-mutate-${n}-` });
  const p = new Deno.Command("sh", {
    args: [
      "-c",
      `tar -C "$1" --exclude=./.git --exclude=./.tools -cf - . | tar -C "$2" -xf -`,
      "sh",
      root,
      dir,
    ],
  });
  if (!(await p.output()).success) throw new Error(`cannot copy the repository to ${dir}`);
  return dir;
}

async function runMutant(dir: string, m: Mutant, timeoutMs: number): Promise<Outcome> {
  const original = await Deno.readTextFile(`${dir}/${m.file}`);
  await Deno.writeTextFile(`${dir}/${m.file}`, m.text);
  try {
    const tests = suites.find((s) => s.files.test(m.file))!.tests;
    const child = new Deno.Command(Deno.execPath(), {
      args: ["test", "--no-check", "-A", "--fail-fast", ...tests],
      cwd: dir,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    const { code, stdout, stderr } = await child.output();
    clearTimeout(timer);
    if (timedOut) return "timeout";
    if (code === 0) return "survived";
    const text = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
    if (/could not be parsed|SyntaxError|Expected .* got/.test(text) && !/\bok \|/.test(text)) {
      return "invalid";
    }
    return "killed";
  } finally {
    await Deno.writeTextFile(`${dir}/${m.file}`, original);
  }
}

if (import.meta.main) {
  const arg = (name: string) => {
    const i = Deno.args.indexOf(name);
    return i >= 0 ? Deno.args[i + 1] : undefined;
  };
  const workers = Number(arg("--workers") ?? "2");
  const only = arg("--only");
  const jsonOut = arg("--json");
  const all = targets.filter((f) => !only || f.includes(only))
    .flatMap((f) => mutants(f, Deno.readTextFileSync(`${root}/${f}`)));
  // deno-lint-ignore no-console
  const log = (s: string) => console.error(s);
  log(
    `${all.length} mutants over ${new Set(all.map((m) => m.file)).size} files, ${workers} workers`,
  );
  const started = performance.now();
  const dirs = await Promise.all(Array.from({ length: workers }, (_, i) => workerCopy(i)));
  const results: (Mutant & { outcome: Outcome })[] = [];
  let next = 0;
  await Promise.all(dirs.map(async (dir) => {
    while (next < all.length) {
      const m = all[next++]!;
      const outcome = await runMutant(dir, m, 240_000);
      results.push({ ...m, outcome });
      if (outcome === "survived") {
        log(`SURVIVED ${m.file}:${m.line} ${m.operator}: ${m.after.trim()}`);
      }
      if (results.length % 25 === 0) log(`${results.length}/${all.length}`);
    }
  }));
  for (const d of dirs) await Deno.remove(d, { recursive: true });
  const areas = ["lib/migrate", "lib/rollout", "lib/kube", "lib/host/durable_file.ts"];
  const lines = areas.map((a) => {
    const rs = results.filter((r) => r.file.startsWith(a) && r.outcome !== "invalid");
    const killed = rs.filter((r) => r.outcome !== "survived").length;
    const pct = rs.length ? ((100 * killed) / rs.length).toFixed(1) : "-";
    return `${a}: ${killed}/${rs.length} killed (${pct} %)`;
  });
  const survivors = results.filter((r) => r.outcome === "survived")
    .sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line);
  const minutes = ((performance.now() - started) / 60_000).toFixed(1);
  // deno-lint-ignore no-console
  console.log(
    [
      ...lines,
      `invalid (not scored): ${results.filter((r) => r.outcome === "invalid").length}`,
      `took ${minutes} min`,
      "",
      "survivors:",
      ...survivors.map((s) => `  ${s.file}:${s.line} ${s.operator}: ${s.after.trim()}`),
    ].join("\n"),
  );
  if (jsonOut) {
    await Deno.writeTextFile(
      jsonOut,
      JSON.stringify(results.map(({ text: _, ...r }) => r), null, 2),
    );
  }
}
