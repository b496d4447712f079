"""The interop table through a stock RFC 8785 library in Python (PyPI `rfc8785`).

usage: canonical.py CASES_JSON
Each case with a `canonical` text: the arguments read by Python's json module, written
by rfc8785, must be that text, byte for byte (its SHA-256 is the gate's `args_sha256`).
"""

import json
import sys

import rfc8785


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    failed = []
    checked = 0
    for case in cases:
        if "canonical" not in case:
            continue
        written = rfc8785.dumps(json.loads(case["arguments"]))
        expected = case["canonical"].encode("utf-8")
        if written != expected:
            failed.append(f"{case['name']}: wrote {written!r}, expected {expected!r}")
        checked += 1
    for line in failed:
        print(line)
    print(f"rfc8785: {checked - len(failed)} of {checked} cases agree")
    sys.exit(1 if failed or checked == 0 else 0)


if __name__ == "__main__":
    main()
