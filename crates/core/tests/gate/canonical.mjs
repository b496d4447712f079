// The interop table through a stock RFC 8785 library in Node (npm `canonicalize`).
//
// usage: node canonical.mjs CASES_JSON CANONICALIZE_JS
// Each case with a `canonical` text: the arguments read by JSON.parse, written by
// canonicalize, must be that text, byte for byte (its SHA-256 is the gate's
// `args_sha256`).

import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [casesPath, libraryPath] = process.argv.slice(2);
const { default: canonicalize } = await import(pathToFileURL(libraryPath).href);

const { cases } = JSON.parse(readFileSync(casesPath, "utf8"));
const failed = [];
let checked = 0;
for (const c of cases) {
  if (!("canonical" in c)) continue;
  const written = canonicalize(JSON.parse(c.arguments));
  if (written !== c.canonical) {
    failed.push(`${c.name}: wrote ${JSON.stringify(written)}, expected ${JSON.stringify(c.canonical)}`);
  }
  checked += 1;
}
for (const line of failed) console.log(line);
console.log(`canonicalize: ${checked - failed.length} of ${checked} cases agree`);
process.exit(failed.length > 0 || checked === 0 ? 1 : 0);
