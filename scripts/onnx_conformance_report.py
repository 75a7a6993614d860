#!/usr/bin/env python3
"""Turns `dinoml onnx-conformance --json` output into the results section of docs/onnx.md
(everything after the line '<!-- results -->' is regenerated)."""
import collections
import json
import re
import sys


def main(json_path, data_dir, doc_path):
    r = json.load(open(json_path))
    cases = r["cases"]
    unsupported_ops = collections.Counter()
    reasons = collections.Counter()
    for c in cases:
        if c["status"] == "unsupported":
            for m in re.finditer(r"operator (\w+) is not supported", c["reason"]):
                unsupported_ops[m.group(1)] += 1
            for m in re.finditer(r"the DinoML op '(\w+)' is not available", c["reason"]):
                unsupported_ops[f"(DinoML {m.group(1)})"] += 1
        key = re.sub(r"'[^']*'", "'…'", c["reason"])[:90] if c["status"] != "passed" else ""
        if key:
            reasons[(c["status"], key)] += 1
    total = r["total"]
    lines = []
    lines.append(f"Measured on this machine (2 cores shared): **{r['passed']} / {total} passed "
                 f"({100.0 * r['passed'] / total:.1f}%)**, {r['failed']} failed, {r['unsupported']} unsupported; "
                 f"full run {r['wall_seconds']:.0f} s wall with {r['jobs']} jobs.\n")
    lines.append("### Unsupported operators (cases that need them)\n")
    lines.append("| operator | cases |\n|---|---|")
    for op, n in unsupported_ops.most_common():
        lines.append(f"| {op} | {n} |")
    lines.append("\n### Most common reasons for a case not passing\n")
    lines.append("| status | reason (names elided) | cases |\n|---|---|---|")
    for (st, k), n in reasons.most_common(40):
        lines.append(f"| {st} | {k.replace('|', '/')} | {n} |")
    lines.append("\n### Every case\n")
    lines.append("| case | status | reason |\n|---|---|---|")
    for c in cases:
        reason = c["reason"].replace("|", "/")
        if len(reason) > 220:
            reason = reason[:220] + "…"
        lines.append(f"| {c['name']} | {c['status']} | {reason} |")
    doc = open(doc_path).read()
    marker = "<!-- results -->"
    head = doc.split(marker)[0]
    open(doc_path, "w").write(head + marker + "\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
