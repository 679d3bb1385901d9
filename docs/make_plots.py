"""Draw the conformance cases' pictures of time into docs/images (shown in docs/plots.md).

    python docs/make_plots.py [OUT_DIR]

Each case's input streams are bound as the conformance tests bind them
(``tests/conformance_cases.py``) and drawn with ``cti.plot.plot_time``, one PNG per case; a
window case (``win_*``) also draws the window's results below its input.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conformance_cases import (  # noqa: E402
    bind_asa_case,
    bind_si_case,
    bind_win_case,
    case_files,
    load,
    win_query,
)

from cti import Application  # noqa: E402
from cti.plot import plot_time  # noqa: E402


def main(out: Path = ROOT / "docs" / "images") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in case_files("asa") + case_files("si") + case_files("win"):
        case, app = load(path), Application()
        target = out / f"{path.stem}.png"
        if path.name.startswith("win"):  # the window's input and its results below it
            stream = bind_win_case(case, app)
            results = {case["kind"]: win_query(case, stream).collect("local")}
            plot_time([stream], target, title=path.stem, results=results)
        else:
            streams = ([bind_asa_case(case, app)] if path.name.startswith("asa")
                       else bind_si_case(case, app))
            plot_time(streams, target, title=path.stem)
        written.append(target)
    return written


if __name__ == "__main__":
    for written in main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"):
        print(written.relative_to(ROOT) if written.is_relative_to(ROOT) else written)
