// Random Jinja expressions and statements for the chat-template oracle:
// a seeded generator over the constructs chat templates use, so the
// differential test explores combinations no hand-written corpus lists.
export function makeRng(seed) {
  let s = BigInt(seed);
  return () => {
    s = (s * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    return Number(s >> 33n) / 2 ** 31;
  };
}

export const fuzzVars = {
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "  Hi there\n" },
    { role: "assistant", content: "<think>\nok\n</think>\n\nHello!", tool_calls: [{ function: { name: "f", arguments: { a: 1 } } }] },
  ],
  obj: { a: 1, b: "two", c: [1, 2, 3], d: { e: null, f: true }, g: 2.5 },
  s: "Hello, World",
  n: 7,
  f: 1.5,
  lst: [3, 1, 2],
  strs: ["b", "a", "C"],
  empty: [],
};

export function generate(rng, count) {
  const pick = (xs) => xs[Math.floor(rng() * xs.length)];
  const lit = () => pick([
    "0", "1", "-1", "3", "42", "2.5", "-0.5", "1.0", "'a'", "'abc'", "''", "' x '", "'é'", "\"q\\\"\"", "'a\\nb'",
    "true", "false", "none", "[]", "[1, 2]", "['x', 'y']", "{}", "{'k': 1}", "{'a': 'b', 'c': [1]}", "(1, 2)",
  ]);
  const vars = () => pick(["messages", "obj", "s", "n", "f", "lst", "strs", "empty", "missing", "messages[0]", "messages[-1]",
    "obj.c", "obj.d", "obj['b']", "messages[1].content", "obj.zz", "lst[0]", "s[1:4]", "lst[::-1]", "messages[0].role"]);
  const filters = ["trim", "upper", "lower", "title", "capitalize", "length", "first", "last", "list", "reverse", "sort",
    "unique", "tojson", "string", "int", "float", "abs", "items", "dictsort", "join", "safe", "default('d')",
    "tojson(indent=2)", "join(', ')", "replace('l', 'L')", "indent(2)", "map(attribute='role')", "selectattr('role', 'equalto', 'user')",
    "rejectattr('role', 'equalto', 'user')", "sort(reverse=true)", "default('x', true)", "int(5)", "length > 1"];
  const tests = ["defined", "undefined", "none", "string", "number", "mapping", "iterable", "sequence", "boolean",
    "true", "false", "odd", "even", "integer", "lower", "upper"];
  const methods = ["upper()", "lower()", "strip()", "lstrip()", "rstrip()", "title()", "startswith('He')", "endswith('d')",
    "split(',')", "split()", "replace('o', '0')", "get('a')", "get('zz', 'dflt')", "items()", "keys()", "values()", "length"];
  const binops = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "and", "or", "in", "not in"];
  const expr = (depth) => {
    if (depth <= 0) return rng() < 0.5 ? lit() : vars();
    switch (Math.floor(rng() * 9)) {
      case 0: return `${expr(depth - 1)} ${pick(binops)} ${expr(depth - 1)}`;
      case 1: return `(${expr(depth - 1)}) | ${pick(filters)}`;
      case 2: return `${expr(depth - 1)} is ${rng() < 0.3 ? "not " : ""}${pick(tests)}`;
      case 3: return `${pick(["s", "obj", "messages[1].content", "'a,b'"])}.${pick(methods)}`;
      case 4: return `${expr(depth - 1)} if ${expr(depth - 1)} else ${expr(depth - 1)}`;
      case 5: return `not ${expr(depth - 1)}`;
      case 6: return `[${expr(depth - 1)}, ${expr(depth - 1)}]`;
      case 7: return `(${expr(depth - 1)})`;
      default: return rng() < 0.5 ? lit() : vars();
    }
  };
  const stmt = (depth) => {
    if (depth <= 0) return `{{ ${expr(2)} }}`;
    switch (Math.floor(rng() * 6)) {
      case 0: return `{% if ${expr(1)} %}${stmt(depth - 1)}{% elif ${expr(1)} %}E{% else %}${stmt(depth - 1)}{% endif %}`;
      case 1: return `{% for x in ${pick(["lst", "strs", "messages", "obj", "empty", "obj.c", "range(3)"])} %}[{{ loop.index }}{{ x if x is string else x | tojson }}]${stmt(depth - 1)}{% else %}none{% endfor %}`;
      case 2: return `{% set v = ${expr(2)} %}{{ v }}${stmt(depth - 1)}`;
      case 3: return `\n  {%- if ${expr(1)} -%}\n  A\n  {%- endif %}\n${stmt(depth - 1)}`;
      case 4: return `{% set ns = namespace(c=0) %}{% for m in messages %}{% set ns.c = ns.c + 1 %}{% endfor %}{{ ns.c }}${stmt(depth - 1)}`;
      default: return `{{ ${expr(3)} }}`;
    }
  };
  const out = [];
  for (let i = 0; i < count; i++) out.push(stmt(2));
  return out;
}
