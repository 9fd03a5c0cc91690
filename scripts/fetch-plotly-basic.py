"""Fetch plotly.js's basic bundle (scatter, bar, pie: every trace the reports draw) from
the npm registry, for the HTML reports to inline instead of the full bundle the plotly
package ships (1.1 MB instead of 4.9: a report of a few runs is 1.2 MB, not 5).

    .venv/bin/python scripts/fetch-plotly-basic.py      (scripts/install-deps.sh runs it)

The version is the plotly package's own plotly.js (the figures are built for it); the
tarball is checked against the registry's integrity digest pinned here, and the bundle
written to <venv>/share/stacklab/plotly-basic-<version>.min.js, where report/html.py
looks. A version not pinned here, or no registry, leaves the report on the full bundle
(said, never an error): what is inlined then is larger, not different."""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

from plotly.offline import get_plotlyjs_version

# plotly.js version -> the registry's sha512 of plotly.js-basic-dist-min's tarball
PINNED = {"3.7.0": "84KPQhLTrO5IHu6DCte2KwA4bzSoVIdIs3uDPWid3sgeTX8L5RjpDARjCG3spgOwQ8MYE8PL+MeQ0DQRWA1Emw=="}
REGISTRY = "https://registry.npmjs.org/plotly.js-basic-dist-min/-/plotly.js-basic-dist-min-{v}.tgz"


def main() -> int:
    version = get_plotlyjs_version()
    target = Path(sys.prefix) / "share" / "stacklab" / f"plotly-basic-{version}.min.js"
    if target.is_file():
        return 0
    if version not in PINNED:
        print(f"fetch-plotly-basic: plotly.js {version} has no pinned basic bundle: the "
              "reports inline the full one")
        return 0
    try:
        with urllib.request.urlopen(REGISTRY.format(v=version), timeout=60) as answer:
            tarball = answer.read()
    except OSError as e:
        print(f"fetch-plotly-basic: {e}: the reports inline the full bundle")
        return 0
    digest = base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    if digest != PINNED[version]:
        print(f"fetch-plotly-basic: the tarball's sha512 is {digest}, not the pinned "
              f"{PINNED[version]}: not used", file=sys.stderr)
        return 1
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
        bundle = tar.extractfile("package/plotly-basic.min.js").read()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(bundle)
    partial.rename(target)
    print(f"fetch-plotly-basic: {target} ({len(bundle):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
